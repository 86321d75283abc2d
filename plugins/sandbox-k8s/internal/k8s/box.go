package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cexec/cexec/internal/tailbuf"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// box is one sandbox: a claimed pod whose zygote runs in a pods/exec
// stream that lives as long as the sandbox.
type box struct {
	id, tenant string
	claim, pod string
	ns         string
	created    time.Time
	limits     sandbox.Limits
	env        map[string]string
	cl         *cluster
	log        hclog.Logger

	runner *runtime.Runner
	stop   context.CancelFunc
	// streamDone is closed when the zygote's exec stream has ended.
	streamDone chan struct{}
	stderr     *tailbuf.Buffer

	executions atomic.Int64
	busy       atomic.Bool
	broken     atomic.Bool
	once       sync.Once
	destroyErr error
}

// zygoteConfig is the runtime's configuration in a sandbox pod: control
// frames on the exec's stdin and stdout, /tmp and /dev/shm emptied between
// sessions. A pod has no per-sandbox process or file size limit, so the
// zygote applies Pids and FileBytes as rlimits. The sandbox container's
// pid namespace holds the idle reaper (pid 1), the zygote and programs
// only (the loader has its own), so the zygote kills every leftover
// process after an execution as bwrap's zygote, its namespace's init, does.
// With a memory limit, a program the kernel kills at it is told so: the
// container sees its own memory cgroup, whose count of those kills is
// memory.events at /sys/fs/cgroup on a cgroup v2 node and memory.oom_control
// at /sys/fs/cgroup/memory on a v1 node.
func zygoteConfig(python string, l sandbox.Limits) runtime.ZygoteConfig {
	zc := runtime.ZygoteConfig{
		Python:           python,
		LibDir:           cexecDir + "/lib",
		StdioControl:     true,
		OwnsPidNamespace: true,
		Scratch:          []string{"/tmp", "/dev/shm"},
		Rlimits:          runtime.Rlimits{Processes: l.Pids, FileSize: l.FileBytes},
	}
	if l.MemoryBytes > 0 {
		zc.MemoryEvents, zc.MemoryLimit = "/sys/fs/cgroup/memory.events:/sys/fs/cgroup/memory/memory.oom_control", l.MemoryBytes
	}
	return zc
}

// zygoteCommand runs the zygote with the request's environment and the
// runtime's (which wins), and nothing else: pods/exec passes no environment
// of its own, and the container's would leak the image's settings.
func zygoteCommand(python string, l sandbox.Limits, env map[string]string) []string {
	zc := zygoteConfig(python, l)
	cmd := []string{"/usr/bin/env", "-i"}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if _, ours := zc.Env()[k]; !ours {
			cmd = append(cmd, k+"="+env[k])
		}
	}
	runtimeEnv := zc.Env()
	for _, k := range slices.Sorted(maps.Keys(runtimeEnv)) {
		cmd = append(cmd, k+"="+runtimeEnv[k])
	}
	return append(cmd, zc.Command()...)
}

// start copies the runtime and the read-only mounts into the pod (through
// the loader, as the sandbox container sees /cexec read-only) and starts
// the zygote.
func (b *box) start(ctx context.Context, s *settings, uploads []upload) error {
	tarball, err := packUploads(uploads)
	if err != nil {
		return err
	}
	if err := b.cl.run(ctx, b.ns, b.pod, loaderName, unpackCommand(s.python), tarball); err != nil {
		return fmt.Errorf("copy the runtime into pod %s: %w", b.pod, err)
	}
	sctx, stop := context.WithCancel(context.Background())
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	b.stop, b.streamDone, b.stderr = stop, make(chan struct{}), tailbuf.New(4096)
	go func() {
		defer close(b.streamDone)
		err := b.cl.stream(sctx, b.ns, b.pod, containerName, zygoteCommand(s.python, b.limits, b.env), stdinR, stdoutW, b.stderr)
		if err == nil {
			err = errors.New("the zygote's exec stream ended")
		}
		stdoutW.CloseWithError(err)
		stdinR.CloseWithError(err)
	}()
	b.runner = runtime.NewRunner(stdinW, stdoutR, runtime.Options{
		Kill:        b.kill,
		Logger:      b.log,
		Timeout:     b.limits.Timeout,
		OutputLimit: b.limits.OutputBytes,
	})
	if _, err := b.runner.Ready(ctx); err != nil {
		return fmt.Errorf("start the runtime in pod %s: %w%s", b.pod, err, b.stderrText())
	}
	return nil
}

func (b *box) stderrText() string {
	if b.stderr == nil {
		return ""
	}
	if t := b.stderr.String(); t != "" {
		return ": " + t
	}
	return ""
}

// kill ends the sandbox from outside when the zygote cannot be trusted to:
// the exec stream goes and the pod is deleted at once. The claim stays
// until Destroy; the pool recycles the sandbox, which is marked broken.
func (b *box) kill() {
	b.broken.Store(true)
	if b.stop != nil {
		b.stop()
	}
	// In the background: the Runner calls kill from its own goroutines.
	go func() {
		zero := int64(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.cl.core.CoreV1().Pods(b.ns).Delete(ctx, b.pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			b.log.Warn("delete the pod of a killed sandbox", "pod", b.pod, "error", err)
		}
	}()
}

func (b *box) exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	if b.broken.Load() {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s must be recycled: an execution left it in an unknown state", b.id)
	}
	if !b.busy.CompareAndSwap(false, true) {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox %s is running another execution", b.id)
	}
	defer b.busy.Store(false)
	b.executions.Add(1)
	res, err := b.runner.Exec(ctx, req, host)
	if !res.SandboxOK {
		b.broken.Store(true)
	}
	if err != nil {
		return res, fmt.Errorf("sandbox %s%s: %w", b.id, b.stderrText(), err)
	}
	return res, nil
}

func (b *box) state() string {
	switch {
	case b.broken.Load():
		return "broken"
	case b.busy.Load():
		return "busy"
	}
	return "idle"
}

// destroy ends the zygote's stream and deletes the claim; the controller
// deletes the Sandbox and the pod with it.
func (b *box) destroy(ctx context.Context) error {
	b.once.Do(func() {
		if b.runner != nil {
			_ = b.runner.Close()
		}
		if b.stop != nil {
			b.stop()
			<-b.streamDone
		}
		err := b.cl.dynamic.Resource(claimGVR).Namespace(b.ns).Delete(ctx, b.claim, background())
		if err != nil && !apierrors.IsNotFound(err) {
			b.destroyErr = fmt.Errorf("destroy sandbox %s: delete SandboxClaim %s: %w", b.id, b.claim, err)
		}
	})
	return b.destroyErr
}
