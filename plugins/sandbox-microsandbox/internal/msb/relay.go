package msb

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// The relay: a 0.2 server runs commands with stdin closed and answers only
// when they end, but it runs several at once. So the zygote runs in one
// long sandbox.command.run with its control descriptors on two named pipes
// in the guest, opened read-write so that they never reach end of file
// while writers and readers come and go; each frame to the zygote is one
// short command that writes it into the first pipe, and a loop of
// commands long-polls the second, returning what the zygote wrote as
// base64. Frames keep their order: one writer and one poller at a time.
// Each hop costs a command (an HTTP round trip and a Python start in the
// guest), so an execution takes tens of milliseconds more than over msb
// exec, and a host call as much again.

const (
	// launchSrc is the zygote's wrapper: make the pipes and open them on
	// descriptors 3 and 4, and only then give them their names, so that a
	// poller that finds the output pipe finds it with a writer; then run
	// the zygote (the remaining arguments).
	launchSrc = `d=$1; shift; mkdir -p "$d" && rm -f "$d/in" "$d/out" "$d/in.new" "$d/out.new" && mkfifo -m 600 "$d/in.new" "$d/out.new" && exec 3<>"$d/in.new" 4<>"$d/out.new" && mv "$d/in.new" "$d/in" && mv "$d/out.new" "$d/out" && exec "$@"`

	// writeSrc writes base64 data (argv[2:]) into the pipe argv[1]. No
	// reader (the zygote is gone) fails the open with ENXIO.
	writeSrc = `import sys,os,base64,time
p=sys.argv[1]
data=base64.b64decode(''.join(sys.argv[2:]))
for _ in range(500):
    if os.path.exists(p): break
    time.sleep(0.01)
fd=os.open(p,os.O_WRONLY|os.O_NONBLOCK)
os.set_blocking(fd,True)
v=memoryview(data)
while v: v=v[os.write(fd,v):]
`

	// readSrc waits up to argv[2] ms for data in the pipe argv[1], reads
	// what is there (at most argv[3] bytes, lingering 2 ms for more) and
	// prints it as base64. Exit status 3: the zygote is gone; 4: the pipe
	// never appeared.
	readSrc = `import sys,os,select,base64,time
p,w,m=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
for _ in range(500):
    if os.path.exists(p): break
    time.sleep(0.01)
else:
    sys.exit(4)
fd=os.open(p,os.O_RDONLY|os.O_NONBLOCK)
buf=bytearray()
end=time.monotonic()+w/1000
eof=False
while len(buf)<m:
    left=0.002 if buf else end-time.monotonic()
    if left<=0 and not buf: break
    r,_,_=select.select([fd],[],[],max(left,0))
    if not r:
        if buf: break
        continue
    try:
        b=os.read(fd,m-len(buf))
    except BlockingIOError:
        continue
    if not b:
        eof=True
        break
    buf+=b
print(base64.b64encode(bytes(buf)).decode())
sys.exit(3 if eof and not buf else 0)
`
)

const (
	// pollWait is how long one poll waits for the zygote to write.
	pollWait = 10 * time.Second
	// pollMax bounds the bytes one poll returns.
	pollMax = 4 << 20
	// writeMax bounds the bytes one write command carries.
	writeMax = 512 << 10
)

// relayBox is a sandbox of a 0.2 server whose zygote is reached through
// the relay.
type relayBox struct {
	b      *serverBackend
	vmName string
	runner *runtime.Runner
	ctl    *relay

	// zygoteDone is closed when the zygote's command ended; zygoteErr then
	// says how.
	zygoteDone chan struct{}
	zygoteErr  error
	stopZygote context.CancelFunc
	killed     atomic.Bool
	killOnce   sync.Once
}

// startRelayBox starts the zygote and waits until it is ready.
func startRelayBox(ctx context.Context, b *serverBackend, name string, zc runtime.ZygoteConfig, lim sandbox.Limits) (*relayBox, error) {
	dir := path.Join(b.s.guestDir, "run")
	env := zc.Env()
	args := append(envArgs(env), "sh", "-c", launchSrc, "sh", dir)
	args = append(args, zc.Command()...)
	zctx, stop := context.WithCancel(context.Background())
	rb := &relayBox{b: b, vmName: name, zygoteDone: make(chan struct{}), stopZygote: stop}
	rb.ctl = newRelay(b, name, path.Join(dir, "in"), path.Join(dir, "out"), rb.zygoteDone)
	go func() {
		defer close(rb.zygoteDone)
		r, err := b.rpc.command(zctx, name, "env", args, 0)
		switch {
		case err != nil:
			rb.zygoteErr = err
		default:
			rb.zygoteErr = &GuestExitError{ExitCode: r.ExitCode, Stderr: lastLines(r.stream("stderr")+r.stream("stdout"), 20)}
		}
	}()
	rb.runner = runtime.NewRunner(rb.ctl.writer(), rb.ctl.reader(), runtime.Options{
		Kill:        rb.kill,
		Logger:      b.log.With("sandbox", name),
		Timeout:     lim.Timeout,
		OutputLimit: lim.OutputBytes,
		// Every frame is a round trip through the server.
		Grace: 5 * time.Second,
	})
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := rb.runner.Ready(rctx); err != nil {
		cause := rb.cause(2 * time.Second)
		rb.stopLocal()
		if cause != nil {
			return nil, fmt.Errorf("start the runtime in %s: %w", name, cause)
		}
		return nil, fmt.Errorf("start the runtime in %s: %w", name, err)
	}
	return rb, nil
}

func (rb *relayBox) name() string { return rb.vmName }

func (rb *relayBox) alive() bool { return rb.runner.Healthy() }

// cause says how the zygote's command ended, waiting up to wait; nil while
// it runs.
func (rb *relayBox) cause(wait time.Duration) error {
	select {
	case <-rb.zygoteDone:
	case <-time.After(wait):
		return nil
	}
	if rb.killed.Load() {
		return errors.New("the sandbox was killed")
	}
	return rb.zygoteErr
}

func (rb *relayBox) exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	res, err := rb.runner.Exec(ctx, req, host)
	if res.Error != nil && res.Error.Type == "Killed" && !rb.killed.Load() {
		if cause := rb.cause(2 * time.Second); cause != nil {
			res.Error.Message += ": " + cause.Error()
		}
	}
	if err != nil && errors.Is(err, pluginapi.ErrUnavailable) {
		if cause := rb.cause(time.Second); cause != nil {
			return res, fmt.Errorf("%w: %w", err, cause)
		}
	}
	return res, err
}

// kill stops the sandbox: the Runner calls it when the zygote misses a
// deadline or breaks the protocol, and the relay cannot signal it.
func (rb *relayBox) kill() {
	rb.killOnce.Do(func() {
		rb.killed.Store(true)
		rb.ctl.shutdown()
		go rb.b.stopQuietly(rb.vmName)
	})
}

// stopLocal closes the channel (asking the zygote to exit) and abandons
// the zygote's command.
func (rb *relayBox) stopLocal() {
	_ = rb.runner.Close()
	rb.ctl.shutdown()
	rb.stopZygote()
}

func (rb *relayBox) destroy(ctx context.Context) error {
	rb.stopLocal()
	return rb.b.stop(ctx, rb.vmName)
}

func (rb *relayBox) health(ctx context.Context) error {
	if _, err := rb.runner.Ping(ctx); err != nil {
		if cause := rb.cause(0); cause != nil {
			return fmt.Errorf("%w: %w", err, cause)
		}
		return err
	}
	return nil
}

// relay is the zygote's control channel over commands.
type relay struct {
	b          *serverBackend
	sandbox    string
	in, out    string
	zygoteDone <-chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	pr     *io.PipeReader
	pw     *io.PipeWriter
	once   sync.Once
	closed atomic.Bool
}

func newRelay(b *serverBackend, sandbox, in, out string, zygoteDone <-chan struct{}) *relay {
	r := &relay{b: b, sandbox: sandbox, in: in, out: out, zygoteDone: zygoteDone}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.pr, r.pw = io.Pipe()
	go r.poll()
	return r
}

// poll moves what the zygote writes into the reader's pipe until the
// zygote is gone or the relay closes.
func (r *relay) poll() {
	args := func() []string {
		return []string{"-I", "-S", "-c", readSrc, r.out, strconv.FormatInt(pollWait.Milliseconds(), 10), strconv.Itoa(pollMax)}
	}
	for {
		res, err := r.b.rpc.command(r.ctx, r.sandbox, r.b.s.python, args(), 0)
		if r.ctx.Err() != nil {
			r.pw.CloseWithError(errors.New("relay closed"))
			return
		}
		if err != nil {
			r.pw.CloseWithError(fmt.Errorf("read from the sandbox runner through the msb server: %w", err))
			return
		}
		switch res.ExitCode {
		case 0, 3:
		case 4:
			select {
			case <-r.zygoteDone:
				r.pw.Close()
				return
			default:
				continue
			}
		default:
			r.pw.CloseWithError(fmt.Errorf("read from the sandbox runner: %w", &GuestExitError{ExitCode: res.ExitCode, Stderr: lastLines(res.stream("stderr"), 10)}))
			return
		}
		data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(res.stream("stdout")))
		if err != nil {
			r.pw.CloseWithError(fmt.Errorf("read from the sandbox runner: the relay printed something that is not base64: %w", err))
			return
		}
		if len(data) > 0 {
			if _, err := r.pw.Write(data); err != nil {
				return
			}
		}
		if res.ExitCode == 3 {
			r.pw.Close()
			return
		}
	}
}

// reader is the zygote's output, for the Runner.
func (r *relay) reader() io.ReadCloser { return relayReader{r} }

// writer is the zygote's input, for the Runner.
func (r *relay) writer() io.WriteCloser { return relayWriter{r} }

// shutdown asks the zygote to exit (it never sees end of file on its
// read-write pipe) and stops polling.
func (r *relay) shutdown() {
	r.once.Do(func() {
		r.closed.Store(true)
		r.cancel()
		_ = r.pr.Close()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			payload := []byte(`{"op":"shutdown"}`)
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
			frame = append(append(frame, 'J'), payload...)
			_ = r.write(ctx, frame)
		}()
	})
}

// write sends bytes to the zygote, one command per writeMax bytes.
func (r *relay) write(ctx context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), writeMax)
		enc := base64.StdEncoding.EncodeToString(p[:n])
		args := append([]string{"-I", "-S", "-c", writeSrc, r.in}, chunks(enc)...)
		res, err := r.b.rpc.command(ctx, r.sandbox, r.b.s.python, args, 60)
		if err != nil {
			return fmt.Errorf("write to the sandbox runner through the msb server: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("write to the sandbox runner: %w", &GuestExitError{ExitCode: res.ExitCode, Stderr: lastLines(res.stream("stderr"), 5)})
		}
		p = p[n:]
	}
	return nil
}

type relayReader struct{ r *relay }

func (rr relayReader) Read(p []byte) (int, error) { return rr.r.pr.Read(p) }

func (rr relayReader) Close() error {
	rr.r.cancel()
	return rr.r.pr.Close()
}

type relayWriter struct{ r *relay }

func (rw relayWriter) Write(p []byte) (int, error) {
	if rw.r.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	if err := rw.r.write(rw.r.ctx, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close is the Runner giving up the channel: the zygote is told to exit.
func (rw relayWriter) Close() error {
	rw.r.shutdown()
	return nil
}
