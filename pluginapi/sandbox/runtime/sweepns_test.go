package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

// reaperSrc stands for a container's idle main process: pid 1 of a new pid
// namespace, it starts the zygote (argv) as its child and reaps orphans
// until the zygote exits.
const reaperSrc = `import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
while True:
    try:
        if os.wait()[0] == pid:
            sys.exit(0)
    except ChildProcessError:
        sys.exit(0)
`

// TestSweepNamespace runs the zygote as a pods/exec puts it in a sandbox
// pod: not pid 1, beside an idle pid 1 that reaps. With OwnsPidNamespace
// it kills a process that a program moved to a session of its own, which
// a process-group kill misses.
func TestSweepNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		testutil.SkipMissing(t, "needs root and unshare(1) for a pid namespace")
	}
	if _, err := os.Stat(python); err != nil {
		testutil.SkipMissing(t, "no %s", python)
	}
	ws := t.TempDir()
	cfg := testConfig(t, ws)
	cfg.StdioControl, cfg.OwnsPidNamespace = true, true
	argv := append([]string{unshare, "--pid", "--fork", "--mount-proc", python, "-I", "-S", "-c", reaperSrc}, cfg.Command()...)
	r, _ := runZygoteArgv(t, Options{}, cfg, argv)
	if !r.hello.Init || r.hello.PID == 1 {
		t.Fatalf("hello %+v: want a zygote that is not pid 1 and sweeps (init)", r.hello)
	}
	token := fmt.Sprintf("cexec-sweepns-%d-%d", os.Getpid(), time.Now().UnixNano())
	res := exec1(t, r, fmt.Sprintf(`import subprocess, sys
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # %s"], start_new_session=True)
print(p.pid)
`, token), nil)
	if res.ExitCode != 0 || !res.SandboxOK {
		t.Fatalf("exec: %+v", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := withToken(token)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v that the program started in a session of its own survived the execution", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := exec1(t, r, "print(2)", nil); res.ExitCode != 0 {
		t.Errorf("the next execution: %+v", res)
	}
}

// withToken lists the host's processes whose command line holds token.
func withToken(token string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), token) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
