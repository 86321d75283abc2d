// Package zygotetest starts the standard runtime's zygote for tests that
// need programs run the way a sandbox runs them, without a sandbox around it.
// It is apart from testutil because it imports the runtime, whose own tests
// use testutil.
package zygotetest

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// Start runs the standard runtime's zygote as a plain child process
// (the sandbox backends wrap the same zygote in their isolation) and returns
// its Runner once the zygote is ready. The runtime library is installed into
// a temporary folder (cfg.LibDir), cfg.Python defaults to Python, and
// opts.Kill and a null opts.Logger are filled in. Both end with the test,
// which logs the zygote's stderr if it failed.
func Start(t testing.TB, cfg runtime.ZygoteConfig, opts runtime.Options) *runtime.Runner {
	t.Helper()
	if cfg.Python == "" {
		cfg.Python = testutil.Python
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		testutil.SkipMissing(t, "no %s: %v", cfg.Python, err)
	}
	cfg.LibDir = t.TempDir()
	if err := runtime.Install(context.Background(), cfg.LibDir, cfg.Python); err != nil {
		t.Fatal(err)
	}
	argv := cfg.Command()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	for k, v := range cfg.Env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.ExtraFiles = []*os.File{inR, outW}
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	// The zygote leads a process group, so killing it takes its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = inR.Close()
	_ = outW.Close()
	pid := cmd.Process.Pid
	opts.Kill = func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	r := runtime.NewRunner(inW, outR, opts)
	t.Cleanup(func() {
		_ = r.Close()
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("zygote stderr: %s", stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.Ready(ctx); err != nil {
		t.Fatalf("zygote not ready: %v (stderr %s)", err, stderr.String())
	}
	return r
}
