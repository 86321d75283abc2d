package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
)

// Defaults of Options.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultOutputLimit = 1 << 20
	DefaultGrace       = 2 * time.Second
	DefaultMaxCalls    = 16
)

// Protocol is the frame protocol version this package speaks.
const Protocol = 1

// Options configure a Runner.
type Options struct {
	// Kill kills the zygote and everything else in the sandbox. The Runner
	// calls it when the zygote misses an execution's deadline by more than
	// Grace or breaks the protocol. Required for those guarantees; a backend
	// that cannot kill from outside should at least close the channel.
	Kill func()
	// Logger receives the Runner's own diagnostics; default: discarded.
	Logger hclog.Logger
	// Timeout is the wall-clock limit of an execution whose request does
	// not set one.
	Timeout time.Duration
	// OutputLimit caps the stdout plus stderr bytes of one execution.
	OutputLimit int64
	// Grace is how long the zygote has, after an execution's deadline or a
	// cancellation, to report before the sandbox is killed.
	Grace time.Duration
	// MaxCalls bounds the host calls of one execution running at once.
	MaxCalls int
}

// Hello is what the zygote reports when it is ready.
type Hello struct {
	PID      int
	Protocol int
	Python   string
	// Init is true when the zygote is its pid namespace's init, so it
	// kills every leftover process after each execution.
	Init bool
}

// Pong is the zygote's answer to Ping.
type Pong struct {
	RSSBytes   int64
	Workers    int
	Executions int64
	Busy       bool
}

// Runner is the host side of one zygote: it runs executions one at a time
// over the zygote's control channel. It is safe for concurrent use; Exec
// calls are serialized.
type Runner struct {
	to   io.WriteCloser
	from io.ReadCloser
	opts Options
	log  hclog.Logger

	seq     atomic.Uint64
	execSem chan struct{}

	wmu    sync.Mutex
	queue  [][]byte
	wake   chan struct{}
	readyC chan struct{}
	hello  Hello

	mu    sync.Mutex
	cur   *execState
	pings map[string]chan Pong

	dead     chan struct{}
	failOnce sync.Once
	err      error
	killOnce sync.Once
}

type inError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// inMsg is any JSON frame from the zygote.
type inMsg struct {
	Op string          `json:"op"`
	ID json.RawMessage `json:"id"`

	PID      int    `json:"pid"`
	Protocol int    `json:"protocol"`
	Python   string `json:"python"`
	Init     bool   `json:"init"`

	RSS        int64 `json:"rss"`
	Workers    int   `json:"workers"`
	Executions int64 `json:"executions"`
	Busy       bool  `json:"busy"`

	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`

	ExitCode    int             `json:"exit_code"`
	Result      json.RawMessage `json:"result"`
	Error       *inError        `json:"error"`
	TimedOut    bool            `json:"timed_out"`
	Truncated   bool            `json:"truncated"`
	Cancelled   bool            `json:"cancelled"`
	Signal      int             `json:"signal"`
	CPUMillis   int64           `json:"cpu_ms"`
	MaxRSS      int64           `json:"max_rss"`
	Clean       bool            `json:"clean"`
	SessionLost bool            `json:"session_lost"`
}

type frame struct {
	kind byte
	data []byte
	msg  *inMsg
}

type execState struct {
	frames chan frame
	done   chan struct{}
}

// NewRunner starts driving a zygote: to is its control input (descriptor 3
// inside the sandbox), from its control output (descriptor 4). The Runner
// owns both and closes them when the zygote dies or on Close.
func NewRunner(to io.WriteCloser, from io.ReadCloser, opts Options) *Runner {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.MaxCalls <= 0 {
		opts.MaxCalls = DefaultMaxCalls
	}
	r := &Runner{
		to:      to,
		from:    from,
		opts:    opts,
		log:     opts.Logger,
		execSem: make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
		readyC:  make(chan struct{}),
		pings:   map[string]chan Pong{},
		dead:    make(chan struct{}),
	}
	go r.readLoop()
	go r.writeLoop()
	return r
}

// Ready waits until the zygote has started and returns what it reported.
func (r *Runner) Ready(ctx context.Context) (Hello, error) {
	select {
	case <-r.readyC:
		if r.hello.Protocol != Protocol {
			r.kill(fmt.Errorf("zygote speaks protocol %d, want %d", r.hello.Protocol, Protocol))
			return Hello{}, r.unavailable()
		}
		return r.hello, nil
	case <-r.dead:
		return Hello{}, r.unavailable()
	case <-ctx.Done():
		return Hello{}, fmt.Errorf("wait for sandbox runner: %w", ctx.Err())
	}
}

// Done is closed when the zygote is gone or the Runner was closed.
func (r *Runner) Done() <-chan struct{} { return r.dead }

// Err says why the Runner stopped; nil while it is healthy.
func (r *Runner) Err() error {
	select {
	case <-r.dead:
		return r.err
	default:
		return nil
	}
}

// Healthy reports whether the zygote is still usable.
func (r *Runner) Healthy() bool { return r.Err() == nil }

// Close stops the Runner and closes the channel, which makes the zygote
// kill its children and exit. It does not call Options.Kill.
func (r *Runner) Close() error {
	r.fail(errors.New("runner closed"))
	return nil
}

func (r *Runner) unavailable() error {
	return fmt.Errorf("sandbox runner: %w: %v", pluginapi.ErrUnavailable, r.err)
}

// fail marks the Runner dead and closes the channel.
func (r *Runner) fail(err error) {
	r.failOnce.Do(func() {
		r.err = err
		close(r.dead)
		_ = r.to.Close()
		_ = r.from.Close()
	})
}

// kill is fail plus killing the sandbox, for a zygote that cannot be
// trusted to clean up any more. The sandbox is killed first, so that an
// execution that finds the Runner dead finds its sandbox killed too.
func (r *Runner) kill(err error) {
	r.log.Warn("killing sandbox", "reason", err.Error())
	r.killOnce.Do(func() {
		if r.opts.Kill != nil {
			r.opts.Kill()
		}
	})
	r.fail(err)
}

// send queues a JSON frame for the writer goroutine, so that no caller
// blocks on a zygote that stopped reading.
func (r *Runner) send(msg any) {
	b, err := encode(msg)
	if err != nil {
		r.kill(fmt.Errorf("encode frame: %w", err))
		return
	}
	r.queue1(b)
}

// queue1 queues one encoded JSON message.
func (r *Runner) queue1(b []byte) {
	r.wmu.Lock()
	r.queue = append(r.queue, appendFrame(nil, kindJSON, b))
	r.wmu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// encode is json.Marshal without HTML escaping, which would only make
// programs (full of < and >) bigger.
func encode(msg any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (r *Runner) writeLoop() {
	for {
		select {
		case <-r.wake:
		case <-r.dead:
			return
		}
		r.wmu.Lock()
		q := r.queue
		r.queue = nil
		r.wmu.Unlock()
		for _, f := range q {
			if _, err := r.to.Write(f); err != nil {
				r.fail(fmt.Errorf("write to sandbox runner: %w", err))
				return
			}
		}
	}
}

func (r *Runner) readLoop() {
	br := bufio.NewReaderSize(r.from, 128<<10)
	for {
		kind, data, err := readFrame(br)
		switch {
		case errors.Is(err, io.EOF):
			r.fail(errors.New("the sandbox runner exited"))
			return
		case errors.Is(err, errBadFrame):
			r.kill(fmt.Errorf("sandbox runner broke the protocol: %w", err))
			return
		case err != nil:
			r.fail(fmt.Errorf("read from sandbox runner: %w", err))
			return
		}
		f := frame{kind: kind, data: data}
		if kind != kindJSON {
			r.deliver(f)
			continue
		}
		f.msg = new(inMsg)
		if err := json.Unmarshal(data, f.msg); err != nil {
			r.kill(fmt.Errorf("sandbox runner sent an invalid frame: %w", err))
			return
		}
		switch f.msg.Op {
		case "ready":
			select {
			case <-r.readyC:
			default:
				r.hello = Hello{PID: f.msg.PID, Protocol: f.msg.Protocol, Python: f.msg.Python, Init: f.msg.Init}
				close(r.readyC)
			}
		case "pong":
			var id string
			_ = json.Unmarshal(f.msg.ID, &id)
			r.mu.Lock()
			ch := r.pings[id]
			delete(r.pings, id)
			r.mu.Unlock()
			if ch != nil {
				ch <- Pong{RSSBytes: f.msg.RSS, Workers: f.msg.Workers, Executions: f.msg.Executions, Busy: f.msg.Busy}
			}
		case "call", "result":
			r.deliver(f)
		case "unclean":
			// Sent after a result was already reported: something of that
			// program survived, so the sandbox must go.
			var msg struct{ Message string }
			_ = json.Unmarshal(data, &msg)
			r.kill(fmt.Errorf("sandbox runner could not clean up after an execution: %s", msg.Message))
			return
		default:
			r.log.Debug("ignoring frame from sandbox runner", "op", f.msg.Op)
		}
	}
}

// deliver hands a frame to the running execution, if any; frames of no
// execution are dropped.
func (r *Runner) deliver(f frame) {
	r.mu.Lock()
	cur := r.cur
	r.mu.Unlock()
	if cur == nil {
		r.log.Debug("dropping frame outside an execution", "kind", string(f.kind))
		return
	}
	select {
	case cur.frames <- f:
	case <-cur.done:
	}
}

// Ping asks the zygote whether it is alive and how big it is.
func (r *Runner) Ping(ctx context.Context) (Pong, error) {
	id := "p" + strconv.FormatUint(r.seq.Add(1), 10)
	ch := make(chan Pong, 1)
	r.mu.Lock()
	r.pings[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pings, id)
		r.mu.Unlock()
	}()
	r.send(map[string]string{"op": "ping", "id": id})
	select {
	case p := <-ch:
		return p, nil
	case <-r.dead:
		return Pong{}, r.unavailable()
	case <-ctx.Done():
		return Pong{}, fmt.Errorf("ping sandbox runner: %w", ctx.Err())
	}
}

// EndSession drops the persistent interpreter of session, if there is one.
func (r *Runner) EndSession(session string) error {
	if !r.Healthy() {
		return r.unavailable()
	}
	r.send(map[string]string{"op": "end_session", "session": session})
	return nil
}
