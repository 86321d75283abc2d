package bwrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// runIn runs code as an execution of session in sandbox id.
func runIn(t *testing.T, sb sandbox.Sandbox, id, session string, persistent bool, code string) (sandbox.ExecResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	h := &plugintest.Host{}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code, Session: session, Persistent: persistent}, h)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %+v\nstdout %q\nstderr %q", res.ExitCode, res.Error, h.Stdout(), h.Stderr())
	}
	return res, h.Stdout()
}

// TestScratchPerSession checks that a warm sandbox gives a new session
// empty /tmp and /dev/shm: what an earlier session left there (100 MiB of
// shared memory, charged to the sandbox's memory) neither shows nor
// starves the next program. Within a session, a persistent interpreter
// keeps its files. /dev/shm is capped.
func TestScratchPerSession(t *testing.T) {
	sb := backend(t, `{}`)
	id, _ := box(t, sb, sandbox.Limits{MemoryBytes: 256 << 20, ShmBytes: 128 << 20})
	const leave = `
import os
with open("/dev/shm/big", "wb") as f:
    for _ in range(100):
        f.write(b"x" * (1 << 20))
os.makedirs("/tmp/d/e")
open("/tmp/d/e/note", "w").write("a")
os.chmod("/tmp/d", 0)
print(sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))
`
	if _, out := runIn(t, sb, id, "a", true, leave); out != "['d'] ['big']\n" {
		t.Fatalf("session a wrote %q", out)
	}
	if _, out := runIn(t, sb, id, "a", true, `import os; os.chmod("/tmp/d", 0o700); print(open("/tmp/d/e/note").read(), os.path.getsize("/dev/shm/big"))`); out != "a 104857600\n" {
		t.Errorf("session a's next execution sees %q, want its own files", out)
	}
	// 100 MiB still in /dev/shm plus 200 MiB more would pass the memory
	// limit of 256 MiB.
	const next = `
import os
print(sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))
hog = bytearray(200 << 20)
for i in range(0, len(hog), 4096):
    hog[i] = 1
print("allocated")
`
	if _, out := runIn(t, sb, id, "b", false, next); out != "[] []\nallocated\n" {
		t.Errorf("session b sees %q, want empty /tmp and /dev/shm and room for its memory", out)
	}
	const fill = `
import errno
try:
    with open("/dev/shm/fill", "wb") as f:
        for _ in range(129):
            f.write(b"x" * (1 << 20))
            f.flush()
    print("no limit")
except OSError as e:
    print(errno.errorcode[e.errno])
`
	if _, out := runIn(t, sb, id, "c", false, fill); out != "ENOSPC\n" {
		t.Errorf("writing past /dev/shm's 128 MiB: %q, want ENOSPC", out)
	}
}

// TestRunAsTenantUser checks that a sandbox runs as the host user its
// request names (its tenant's) when the plugin is root: the files it
// writes are that user's, a workspace closed to everyone else is usable,
// and processes of other users (another tenant's, nobody) cannot enter
// its namespaces. Root itself is refused as a sandbox user.
func TestRunAsTenantUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes run as another host user only when the plugin is root")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		testutil.SkipMissing(t, "no nsenter (util-linux)")
	}
	sb := backend(t, `{}`)
	const uid, other = 300500, 300501
	// A workspace below a folder only root may enter, as cexecd's are.
	private := t.TempDir()
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(private, "workspace")
	must(t, os.Mkdir(ws, 0o700))
	must(t, os.Chown(ws, uid, uid))
	id := fmt.Sprintf("t%d-runas", os.Getpid())
	req := sandbox.CreateRequest{ID: id, Tenant: "tenant-a", Mounts: []sandbox.Mount{{Source: ws, Target: "/workspace"}},
		RunAs: &sandbox.HostUser{UID: uid, GID: uid}}
	diags, err := sb.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(diags) > 0 && strings.Contains(fmt.Sprint(diags), "handed") {
		t.Errorf("the workspace was handed over: %v", diags)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background(), id) })
	if _, out := runIn(t, sb, id, "s", false, `open("/workspace/f", "w").write("x"); print("ok")`); out != "ok\n" {
		t.Fatalf("program printed %q", out)
	}
	// Started as the tenant's user, bwrap still roots the sandbox's cgroup
	// namespace at its own cgroup.
	_, cgroups := runIn(t, sb, id, "s", false, `print(open("/proc/self/cgroup").read(), end="")`)
	for _, line := range strings.Split(strings.TrimSpace(cgroups), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("/proc/self/cgroup line %q is not the namespace's root", line)
		}
	}
	st, err := os.Stat(filepath.Join(ws, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Sys().(*syscall.Stat_t); got.Uid != uid || got.Gid != uid {
		t.Errorf("file written in the sandbox is %d:%d on the host, want the tenant's %d:%d", got.Uid, got.Gid, uid, uid)
	}

	pid := processOf(t, uid)
	for _, tt := range []struct {
		name string
		uid  uint32
		ok   bool
	}{{"root", 0, true}, {"another tenant's user", other, false}, {"nobody", 65534, false}} {
		cmd := exec.Command(nsenter, "-t", strconv.Itoa(pid), "-m", "-U", "--preserve-credentials", "true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tt.uid, Gid: tt.uid, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if (err == nil) != tt.ok {
			t.Errorf("nsenter into the sandbox as %s: %v %s; want success %v", tt.name, err, out, tt.ok)
		}
	}

	bad := sandbox.CreateRequest{ID: id + "-root", Mounts: req.Mounts, RunAs: &sandbox.HostUser{UID: 0, GID: 0}}
	if _, err := sb.Create(t.Context(), bad); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("create as root: %v, want ErrInvalidArgument", err)
	}
}

// processOf finds a process running as host uid (the sandbox's).
func processOf(t *testing.T, uid int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				if comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm"); strings.HasPrefix(string(comm), "python") {
					return pid
				}
			}
		}
	}
	t.Fatalf("no sandbox process runs as uid %d", uid)
	return 0
}
