package msb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/tailbuf"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// Labels every sandbox of this backend carries, so that `msb ls --label`
// finds them and orphans of a dead plugin can be told from others' VMs.
const (
	labelBackend = "cexec.backend=microsandbox"
	labelOwner   = "cexec.owner"
	labelTenant  = "cexec.tenant"
)

// readyTimeout bounds how long the zygote may take to report ready once
// the VM runs.
const readyTimeout = 60 * time.Second

// cliBackend drives the msb 0.7 command-line tool.
type cliBackend struct {
	s      *settings
	log    hclog.Logger
	libDir func(context.Context) (string, error)

	mu     sync.Mutex
	c      *cli
	reaped bool
}

func newCLIBackend(s *settings, log hclog.Logger, libDir func(context.Context) (string, error)) *cliBackend {
	return &cliBackend{s: s, log: log, libDir: libDir}
}

// probe finds msb, checks its version and runs `msb doctor`.
func (b *cliBackend) probe(ctx context.Context) error {
	c, err := resolveCLI(ctx, b.s.msb, b.s.msbHome)
	if err != nil {
		if _, serr := os.Stat("/dev/kvm"); serr != nil {
			return fmt.Errorf("%w; this machine has no /dev/kvm either (no hardware virtualisation, or the kvm module is not loaded)", err)
		}
		return err
	}
	if err := c.doctor(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
	return nil
}

func (b *cliBackend) cli() (*cli, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return nil, fmt.Errorf("%w: msb has not been found yet", pluginapi.ErrUnavailable)
	}
	return b.c, nil
}

func (b *cliBackend) close() {}

// sandboxName is the msb name of sandbox id: it carries the plugin's pid,
// so that orphans of a plugin that died can be found.
func sandboxName(id string) string {
	return "cexec-" + strconv.Itoa(os.Getpid()) + "-" + id
}

// reapOrphans removes, once per process, sandboxes this backend created
// in plugin processes that no longer run: microVMs run detached, so
// nothing else stops them when cexecd dies.
func (b *cliBackend) reapOrphans(ctx context.Context, c *cli) {
	b.mu.Lock()
	done := b.reaped
	b.reaped = true
	b.mu.Unlock()
	if done {
		return
	}
	entries, err := c.list(ctx, labelBackend)
	if err != nil {
		b.log.Warn("list sandboxes of earlier runs", "error", err)
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name, "cexec-")
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		b.log.Info("removing a sandbox left by an earlier run", "sandbox", e.Name, "status", e.Status)
		if err := c.remove(ctx, e.Name); err != nil {
			b.log.Warn("remove sandbox of an earlier run", "sandbox", e.Name, "error", err)
		}
	}
}

// processAlive reports whether pid exists (signal 0 succeeds or is
// refused for permissions).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// createArgs is the `msb create` command line for sp.
func (b *cliBackend) createArgs(sp *spec, name, lib string, env map[string]string) []string {
	args := []string{"create", "--quiet", "--name", name,
		"--cpus", strconv.FormatInt(sp.cpus, 10),
		"--memory", strconv.FormatInt(sp.memoryMB, 10) + "M",
		"--tmpfs", "/tmp:" + strconv.FormatInt(sp.tmpMB, 10) + "M",
		"--workdir", guestWorkspace,
		"--label", labelBackend,
		"--label", labelOwner + "=" + strconv.Itoa(os.Getpid())}
	if sp.tenant != "" {
		args = append(args, "--label", labelTenant+"="+sp.tenant)
	}
	if !sp.network {
		args = append(args, "--no-net")
	}
	mount := func(src, dst string, ro bool) {
		flag := "--mount-dir"
		if !isDir(src) {
			flag = "--mount-file"
		}
		v := src + ":" + dst
		if ro {
			v += ":ro"
		}
		args = append(args, flag, v)
	}
	mount(lib, guestLib, true)
	hasWorkspace := false
	for _, m := range sp.mounts {
		mount(m.Source, m.Target, m.ReadOnly)
		hasWorkspace = hasWorkspace || m.Target == guestWorkspace
	}
	if !hasWorkspace {
		args = append(args, "--mkdir", guestWorkspace)
	}
	for _, k := range sortedKeys(env) {
		args = append(args, "--env", k+"="+env[k])
	}
	return append(args, b.s.image)
}

// create boots the VM with `msb create`, then starts the zygote in it.
// Whatever fails, the VM is removed: msb keeps the record of a sandbox
// that failed to boot.
func (b *cliBackend) create(ctx context.Context, sp *spec) (box, error) {
	c, err := b.cli()
	if err != nil {
		return nil, err
	}
	b.reapOrphans(ctx, c)
	lib, err := b.libDir(ctx)
	if err != nil {
		return nil, err
	}
	zc := zygoteConfig(b.s, guestLib, nil, true, sp)
	env := zc.Env()
	for k, v := range sp.env {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	name := sandboxName(sp.id)
	bctx, cancel := context.WithTimeout(ctx, b.s.bootTimeout)
	defer cancel()
	cleanup := func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.remove(rctx, name); err != nil {
			b.log.Warn("remove sandbox that failed to start", "sandbox", name, "error", err)
		}
	}
	if _, err := c.run(bctx, b.createArgs(sp, name, lib, env)...); err != nil {
		cleanup()
		return nil, err
	}
	bx, err := startCLIBox(bctx, c, b.log.With("sandbox", name), name, zc, b.s.pidNamespace, env, sp.limits)
	if err != nil {
		cleanup()
		return nil, err
	}
	return bx, nil
}

// usage combines `msb list` (is the VM running?) and `msb metrics` (its
// memory) for this process's sandboxes.
func (b *cliBackend) usage(ctx context.Context) (map[string]usage, error) {
	c, err := b.cli()
	if err != nil {
		return nil, err
	}
	entries, err := c.list(ctx, labelOwner+"="+strconv.Itoa(os.Getpid()))
	if err != nil {
		return nil, err
	}
	m, err := c.metrics(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]usage, len(entries))
	for _, e := range entries {
		out[e.Name] = usage{running: e.Status == "Running", rssBytes: m[e.Name].MemoryBytes}
	}
	return out, nil
}

// pidnsLauncher starts the zygote (its arguments) as init of a new pid
// namespace with its own /proc, where the guest allows it, so that it
// kills whatever a program leaves running, as under bubblewrap; where
// unshare is missing or refused, the zygote runs as it is.
const pidnsLauncher = `if unshare --pid --fork --kill-child --mount-proc true 2>/dev/null; then exec unshare --pid --fork --kill-child --mount-proc -- "$@"; fi; exec "$@"`

// zygoteCommand is the command msb exec runs in the guest.
func zygoteCommand(zc runtime.ZygoteConfig, pidns bool) []string {
	if !pidns {
		return zc.Command()
	}
	return append([]string{"/bin/sh", "-c", pidnsLauncher, "sh"}, zc.Command()...)
}

// GuestExitError is the end of the runtime inside the guest, as `msb
// exec` passed on its exit status: not a failure of msb itself.
type GuestExitError struct {
	ExitCode int
	Stderr   string
}

func (e *GuestExitError) Error() string {
	msg := fmt.Sprintf("the runtime in the guest exited with status %d", e.ExitCode)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// cliBox is one microVM and the `msb exec --stream` session that runs its
// zygote.
type cliBox struct {
	c      *cli
	vmName string
	log    hclog.Logger

	cmd    *exec.Cmd
	runner *runtime.Runner
	exited chan struct{}
	stderr *tailbuf.Buffer
	// stderrDone is closed when msb exec closed its stderr.
	stderrDone chan struct{}
	killed     atomic.Bool
	killOnce   sync.Once
}

// startCLIBox runs the zygote in VM name and waits until it is ready.
func startCLIBox(ctx context.Context, c *cli, log hclog.Logger, name string, zc runtime.ZygoteConfig, pidns bool, env map[string]string, lim sandbox.Limits) (*cliBox, error) {
	b := &cliBox{c: c, vmName: name, log: log, exited: make(chan struct{}), stderr: tailbuf.New(4096), stderrDone: make(chan struct{})}
	args := []string{"exec", "--quiet", "--stream", "--workdir", guestWorkspace}
	for _, k := range sortedKeys(env) {
		args = append(args, "--env", k+"="+env[k])
	}
	args = append(append(args, name, "--"), zygoteCommand(zc, pidns)...)
	// Not bound to ctx: the session lives as long as the sandbox. Plain
	// pipes rather than cmd's, which Wait would close under the Runner.
	cmd := c.command(context.Background(), args...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderrW
	// msb exec goes with the plugin; the VM itself is reaped by the next run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		closeFiles(inR, inW, outR, outW, stderrR, stderrW)
		return nil, fmt.Errorf("run msb exec: %w", err)
	}
	closeFiles(inR, outW, stderrW)
	b.cmd = cmd
	go b.pumpStderr(stderrR)
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	b.runner = runtime.NewRunner(inW, outR, runtime.Options{
		Kill:        b.kill,
		Logger:      log,
		Timeout:     lim.Timeout,
		OutputLimit: lim.OutputBytes,
	})
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := b.runner.Ready(rctx); err != nil {
		cause := b.cause(2 * time.Second)
		_ = b.destroyLocal()
		if cause != nil {
			return nil, fmt.Errorf("start the runtime in %s: %w", name, cause)
		}
		return nil, fmt.Errorf("start the runtime in %s: %w", name, err)
	}
	return b, nil
}

func (b *cliBox) name() string { return b.vmName }

func (b *cliBox) alive() bool {
	select {
	case <-b.exited:
		return false
	default:
		return b.runner.Healthy()
	}
}

func (b *cliBox) pumpStderr(r *os.File) {
	defer close(b.stderrDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		b.stderr.WriteLine(sc.Text())
		b.log.Debug("msb exec stderr", "line", sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}

// cause says why msb exec ended, waiting up to wait for it to: a
// *CommandError when msb itself failed (it exits 2 for arguments it
// rejects and prints "error: ..." for its own failures, such as a VM that
// is gone or a command it could not spawn), a *GuestExitError when the
// guest's runtime exited, nil when it still runs or was killed here.
func (b *cliBox) cause(wait time.Duration) error {
	select {
	case <-b.exited:
	case <-time.After(wait):
		return nil
	}
	select {
	case <-b.stderrDone:
	case <-time.After(time.Second):
	}
	if b.killed.Load() {
		return errors.New("the sandbox was killed")
	}
	code := b.cmd.ProcessState.ExitCode()
	text := b.stderr.String()
	if code == 2 || hasErrorLine(text) {
		return &CommandError{Command: "exec", ExitCode: code, Message: errorText(text)}
	}
	if code < 0 {
		return fmt.Errorf("msb exec was killed by a signal: %s", b.cmd.ProcessState)
	}
	return &GuestExitError{ExitCode: code, Stderr: strings.TrimSpace(text)}
}

// hasErrorLine reports whether msb printed one of its "error:" lines.
func hasErrorLine(s string) bool {
	for _, l := range strings.Split(ansi.ReplaceAllString(s, ""), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "error:") {
			return true
		}
	}
	return false
}

func (b *cliBox) exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	res, err := b.runner.Exec(ctx, req, host)
	if res.Error != nil && res.Error.Type == "Killed" && !b.killed.Load() {
		if cause := b.cause(2 * time.Second); cause != nil {
			res.Error.Message += ": " + cause.Error()
		}
	}
	if err != nil && errors.Is(err, pluginapi.ErrUnavailable) {
		if cause := b.cause(time.Second); cause != nil {
			return res, fmt.Errorf("%w: %w", err, cause)
		}
	}
	return res, err
}

// kill ends the msb exec session and force-stops the VM: the Runner calls
// it when the zygote misses a deadline or breaks the protocol.
func (b *cliBox) kill() {
	b.killOnce.Do(func() {
		b.killed.Store(true)
		if b.cmd != nil && b.cmd.Process != nil {
			_ = b.cmd.Process.Kill()
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := b.c.run(ctx, "stop", "--force", b.vmName); err != nil {
				b.log.Debug("force-stop killed sandbox", "error", err)
			}
		}()
	})
}

// destroyLocal closes the zygote's channel and waits for msb exec to end,
// killing it after a moment.
func (b *cliBox) destroyLocal() error {
	if b.runner != nil {
		_ = b.runner.Close()
	}
	select {
	case <-b.exited:
		return nil
	case <-time.After(3 * time.Second):
	}
	b.killed.Store(true)
	_ = b.cmd.Process.Kill()
	select {
	case <-b.exited:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("msb exec did not exit")
	}
}

func (b *cliBox) destroy(ctx context.Context) error {
	err := b.destroyLocal()
	if rerr := b.c.remove(ctx, b.vmName); rerr != nil {
		return rerr
	}
	return err
}

func (b *cliBox) health(ctx context.Context) error {
	in, err := b.c.inspect(ctx, b.vmName)
	if err != nil {
		return err
	}
	if in.Status != "Running" {
		return fmt.Errorf("the microVM is %s", strings.ToLower(in.Status))
	}
	if _, err := b.runner.Ping(ctx); err != nil {
		if cause := b.cause(0); cause != nil {
			return fmt.Errorf("%w: %w", err, cause)
		}
		return err
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
