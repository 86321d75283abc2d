package bwrap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/internal/tailbuf"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
	"github.com/cexec/cexec/plugins/sandbox-bwrap/internal/bwrapproc"
)

// readyTimeout bounds how long a new sandbox may take to report ready.
const readyTimeout = 20 * time.Second

// box is one running sandbox: a bwrap process whose child (the pid
// namespace's init) is the runtime's zygote.
type box struct {
	id      string
	tenant  string
	created time.Time
	limits  sandbox.Limits
	log     hclog.Logger

	cmd       *exec.Cmd
	zygotePID int
	pidfd     int
	cg        *sandboxCgroup
	runner    *runtime.Runner
	exited    chan struct{}
	stderr    *tailbuf.Buffer
	// stderrDone is closed when everything in the sandbox has closed its
	// stderr, so stderr holds all that bwrap said.
	stderrDone chan struct{}

	executions atomic.Int64
	busy       atomic.Bool
	broken     atomic.Bool
	killOnce   sync.Once
}

// startBox starts a sandbox and waits until its zygote is ready.
// boxDirs are what the plugin prepared on the host for every sandbox.
type boxDirs struct {
	// lib holds the runtime (see Plugin.libDir), etc the sandbox's /etc
	// (see etcView), and stage is where launch mounts staged sources.
	lib, etc, stage string
	// sitePath is ZygoteConfig.SitePath (see Plugin.sitePath).
	sitePath []string
	// interp is the interpreter's execute-only copy, bound over it (see
	// Plugin.interpreter); "" for none.
	interp string
	// memEvents is the sandbox's memory cgroup file that counts kills at
	// its limit (sandboxCgroup.eventsFile); "" without a cgroup.
	memEvents string
}

func startBox(ctx context.Context, s *settings, spec *boxSpec, dirs boxDirs, seccomp []byte, cg *sandboxCgroup, log hclog.Logger) (*box, error) {
	b := &box{
		id: spec.id, tenant: spec.tenant, created: time.Now(), limits: spec.limits,
		log: log.With("sandbox", spec.id), cg: cg, pidfd: -1, exited: make(chan struct{}),
		stderr: tailbuf.New(4096), stderrDone: make(chan struct{}),
	}
	p, err := openPipes(seccomp)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.id, err)
	}
	cmd := bwrapCommand(s, spec, dirs, p)
	var binds []sandbox.Mount
	if spec.runAs != nil {
		binds = spec.mounts
	}
	if err := launch(cmd, dirs.stage, binds, cg, b.exited); err != nil {
		closeFiles(p.parentEnds...)
		closeFiles(p.childEnds...)
		return nil, fmt.Errorf("start sandbox %s: run %s: %w", spec.id, s.bwrap, err)
	}
	closeFiles(p.childEnds...)
	b.cmd = cmd
	go b.pumpStderr(p.stderrR)
	if err := b.attach(ctx, p); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w%s", spec.id, err, b.stderrText())
	}
	return b, nil
}

// attach takes over the zygote of a launched bwrap: it learns its pid,
// moves it into the cgroup, and waits until it is ready. On failure the
// sandbox is gone.
func (b *box) attach(ctx context.Context, p *boxPipes) error {
	pid, err := b.readChildPID(ctx, p.infoR)
	if err != nil {
		return b.abort(p, err)
	}
	p.infoR.Close()
	b.zygotePID = pid
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		b.pidfd = fd
	}
	if b.cg != nil && !b.cg.entered {
		// The zygote forks nothing before its first execution, so every
		// process of the program starts inside the cgroup.
		if err := b.cg.add(pid); err != nil {
			return b.abort(p, err)
		}
	}
	b.runner = runtime.NewRunner(p.ctlInW, p.ctlOutR, runtime.Options{
		Kill:        b.kill,
		Logger:      b.log,
		Timeout:     b.limits.Timeout,
		OutputLimit: b.limits.OutputBytes,
	})
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := b.runner.Ready(rctx); err != nil {
		_ = b.destroy(context.Background())
		return err
	}
	return nil
}

// abort kills a sandbox that failed to start and returns err. It closes
// infoR only once bwrap is gone: bwrap writes it after cloning the
// sandbox's first process, and dying there of SIGPIPE would orphan that
// process (see killBwrap).
func (b *box) abort(p *boxPipes, err error) error {
	b.kill()
	<-b.exited
	closeFiles(p.infoR, p.ctlInW, p.ctlOutR)
	return err
}

// bwrapCommand is the bwrap command of a sandbox, with the child's ends
// of p at the descriptors bwrapArgs names.
func bwrapCommand(s *settings, spec *boxSpec, dirs boxDirs, p *boxPipes) *exec.Cmd {
	sources := make([]string, len(spec.mounts))
	for i, m := range spec.mounts {
		sources[i] = m.Source
	}
	if spec.runAs != nil {
		sources = stagedSources(dirs.stage, len(spec.mounts))
	}
	cmd := exec.Command(s.bwrap, bwrapArgs(s, spec, dirs, sources)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Stderr = p.stderrW
	for fd := fdCtlIn; fd <= fdInfo; fd++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, p.files[fd])
	}
	cmd.SysProcAttr = sysProcAttr(spec.runAs)
	return cmd
}

// boxPipes are the pipes between the plugin and a new sandbox: the
// zygote's control channel, bwrap's --info-fd, the files bwrap reads
// (the seccomp filter, passwd, group, hosts) and stderr.
type boxPipes struct {
	ctlInW, ctlOutR, infoR, stderrR *os.File
	stderrW                         *os.File
	// files are the child's ends by the descriptor bwrap finds them at.
	files                 map[int]*os.File
	parentEnds, childEnds []*os.File
}

// openPipes makes the pipes of a sandbox, closing them all on failure.
func openPipes(seccomp []byte) (*boxPipes, error) {
	p := &boxPipes{files: map[int]*os.File{}}
	err := p.open(seccomp)
	if err != nil {
		closeFiles(p.parentEnds...)
		closeFiles(p.childEnds...)
		return nil, err
	}
	return p, nil
}

func (p *boxPipes) open(seccomp []byte) error {
	ctlInR, ctlInW, err := os.Pipe()
	if err != nil {
		return err
	}
	p.parentEnds, p.childEnds = append(p.parentEnds, ctlInW), append(p.childEnds, ctlInR)
	ctlOutR, ctlOutW, err := os.Pipe()
	if err != nil {
		return err
	}
	p.parentEnds, p.childEnds = append(p.parentEnds, ctlOutR), append(p.childEnds, ctlOutW)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return err
	}
	p.parentEnds, p.childEnds = append(p.parentEnds, infoR), append(p.childEnds, infoW)
	p.ctlInW, p.ctlOutR, p.infoR = ctlInW, ctlOutR, infoR
	p.files[fdCtlIn], p.files[fdCtlOut], p.files[fdInfo] = ctlInR, ctlOutW, infoW
	r, err := dataPipe(seccomp)
	if err != nil {
		return err
	}
	p.files[fdSeccomp] = r
	p.childEnds = append(p.childEnds, r)
	p.stderrR, p.stderrW, err = os.Pipe()
	if err != nil {
		return err
	}
	p.parentEnds, p.childEnds = append(p.parentEnds, p.stderrR), append(p.childEnds, p.stderrW)
	return nil
}

// dataPipe returns the read end of a pipe already holding data, which
// fits in the pipe buffer.
func dataPipe(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// closeFiles closes fs.
func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// stagedSources are the paths at which launch mounts n sources for bwrap.
func stagedSources(stageDir string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = filepath.Join(stageDir, strconv.Itoa(i))
	}
	return out
}

// launch starts cmd and closes exited once it has been waited for.
//
// cmd is started from a dedicated OS thread that lives until bwrap exits,
// because the kernel sends the parent death signal (Pdeathsig, see
// sysProcAttr) when the thread that forked exits, not the process: started
// from any thread of the Go runtime, bwrap could be killed whenever that
// thread ends (as a locked thread does when its goroutine returns).
//
// With binds (the plugin is root and bwrap runs as run_as), bwrap could not
// reach sources below directories closed to run_as, such as a 0700 data
// directory. So the thread also gets its own mount namespace, in which a
// tmpfs covers stageDir and each bind's source is mounted at
// stagedSources(stageDir)[i]. Nothing of this is visible on the host.
//
// With cg, bwrap starts in the sandbox's cgroup (see sandboxCgroup.enter).
func launch(cmd *exec.Cmd, stageDir string, binds []sandbox.Mount, cg *sandboxCgroup, exited chan struct{}) error {
	started := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns, the thread and its
		// mount namespace go away with it.
		goruntime.LockOSThread()
		if len(binds) > 0 {
			if err := stage(stageDir, binds); err != nil {
				started <- err
				return
			}
		}
		leave := func() error { return nil }
		if cg != nil {
			var err error
			if leave, err = cg.enter(cmd); err != nil {
				started <- err
				return
			}
		}
		err := cmd.Start()
		if lerr := leave(); lerr != nil {
			if err == nil {
				// The thread stays in the sandbox's cgroup, whose kill
				// would take the plugin: end bwrap and this thread.
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				close(exited)
			}
			started <- fmt.Errorf("leave the sandbox's cgroup: %w", lerr)
			return
		}
		if err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	return <-started
}

// stage gives the calling thread a private mount namespace with binds
// mounted below stageDir.
func stage(stageDir string, binds []sandbox.Mount) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("private mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mount namespace: %w", err)
	}
	if err := unix.Mount("cexec-stage", stageDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0711,size=64k"); err != nil {
		return fmt.Errorf("stage mounts: %w", err)
	}
	for i, m := range binds {
		dst := filepath.Join(stageDir, strconv.Itoa(i))
		var err error
		if fi, serr := os.Stat(m.Source); serr == nil && !fi.IsDir() {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		} else {
			err = os.Mkdir(dst, 0o755)
		}
		if err == nil {
			err = unix.Mount(m.Source, dst, "", unix.MS_BIND|unix.MS_REC, "")
		}
		if err != nil {
			return fmt.Errorf("stage mount %s: %w", m.Source, err)
		}
	}
	return nil
}

// sysProcAttr starts bwrap as the sandbox's host user runAs (its tenant's
// or run_as when the plugin is root), or the plugin's own when nil.
// Mapping the sandbox user to host root would make programs the owner of
// kernel settings in /proc/sys and of the host's device nodes.
func sysProcAttr(runAs *[2]uint32) *syscall.SysProcAttr {
	// bwrap's --die-with-parent covers the sandbox; this covers bwrap.
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if runAs != nil {
		a.Credential = &syscall.Credential{Uid: runAs[0], Gid: runAs[1], Groups: []uint32{}}
	}
	return a
}

// readChildPID reads bwrap's --info-fd JSON, which names the sandbox's first
// process (the zygote, thanks to --as-pid-1) by its pid on the host.
func (b *box) readChildPID(ctx context.Context, r io.Reader) (int, error) {
	type info struct {
		ChildPID int `json:"child-pid"`
	}
	ch := make(chan info, 1)
	errc := make(chan error, 1)
	go func() {
		var i info
		// One JSON value only: the zygote inherits bwrap's write end, so
		// the pipe never reaches end of file.
		if err := json.NewDecoder(r).Decode(&i); err != nil {
			errc <- fmt.Errorf("bwrap did not report its sandbox: %w", err)
			return
		}
		ch <- i
	}()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case i := <-ch:
		if i.ChildPID <= 0 {
			return 0, errors.New("bwrap reported no child pid")
		}
		return i.ChildPID, nil
	case err := <-errc:
		return 0, err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
		return 0, errors.New("bwrap did not start in time")
	}
}

func (b *box) pumpStderr(r *os.File) {
	defer close(b.stderrDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		b.stderr.WriteLine(line)
		b.log.Debug("sandbox stderr", "line", line)
	}
	// A line too long for the scanner: keep draining, so that nothing in
	// the sandbox blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
}

// stderrText waits briefly for the sandbox's stderr to end and returns
// ": <its last lines>", or "".
func (b *box) stderrText() string {
	select {
	case <-b.stderrDone:
	case <-time.After(time.Second):
	}
	if s := strings.TrimSpace(b.stderr.String()); s != "" {
		return ": " + s
	}
	return ""
}

// kill kills the zygote, which as the pid namespace's init takes every
// process of the sandbox with it, and bwrap.
func (b *box) kill() {
	b.killOnce.Do(func() {
		b.broken.Store(true)
		if b.cg != nil {
			b.cg.kill()
		}
		if b.pidfd < 0 {
			b.killBwrap()
			return
		}
		_ = unix.PidfdSendSignal(b.pidfd, unix.SIGKILL, nil, 0)
		// bwrap reaps the zygote and exits; killing bwrap first would leave
		// the zygote's zombie to the host's init, which may be slow.
		go func() {
			select {
			case <-b.exited:
			case <-time.After(time.Second):
				b.killBwrap()
			}
		}()
	})
}

// killBwrap kills bwrap without orphaning the zygote (see bwrapproc).
func (b *box) killBwrap() {
	if b.cmd != nil && b.cmd.Process != nil {
		bwrapproc.Kill(b.cmd.Process, b.exited)
	}
}

// destroy kills the sandbox and releases everything it holds.
func (b *box) destroy(ctx context.Context) error {
	if b.runner != nil {
		_ = b.runner.Close()
	}
	b.kill()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	select {
	case <-b.exited:
	case <-ctx.Done():
		err = fmt.Errorf("sandbox %s did not exit: %w", b.id, ctx.Err())
	}
	if b.pidfd >= 0 {
		_ = unix.Close(b.pidfd)
		b.pidfd = -1
	}
	if b.cg != nil {
		if cerr := b.cg.remove(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// state is the sandbox's state for List.
func (b *box) state() string {
	select {
	case <-b.exited:
		return "exited"
	default:
	}
	switch {
	case b.broken.Load() || !b.runner.Healthy():
		return "broken"
	case b.busy.Load():
		return "busy"
	}
	return "ready"
}

// memory is the sandbox's memory: the PSS of its processes (see
// treeMemory), or the zygote's VmRSS where that cannot be read.
func (b *box) memory() int64 {
	return treeMemory(b.cmd.Process.Pid, b.zygotePID)
}
