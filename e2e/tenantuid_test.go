package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTenantsApartOnHost runs a root cexecd with tenant_uids: each tenant's
// sandboxes run as its own host user, which owns its 0700 workspace below
// root's closed folders, and a tenant removed by gc loses its sandboxes, so
// that the tenant created again under the same id starts afresh.
func TestTenantsApartOnHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("tenants get host users of their own only when cexecd runs as root")
	}
	s := newSetup(t)
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "cexec {\n", "cexec {\n  tenant_uids = \"310000-310099\"\n", 1)
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, s)
	requireSandbox(t, s)

	owner := func(p string) (uint32, os.FileMode) {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Uid, st.Mode().Perm()
	}
	uids := map[string]uint32{}
	for _, tenant := range []string{"t1", "t2"} {
		r, _ := sbxJSON(t, s, "--tenant", tenant, "-c", "open('/workspace/f', 'w').write('x')\nprint('ok')")
		if r.ExitCode != 0 || r.Stdout != "ok\n" {
			t.Fatalf("tenant %s: %+v", tenant, r)
		}
		uid, mode := owner(filepath.Join(workspaceDir(s, tenant), "f"))
		if uid < 310000 || uid > 310099 {
			t.Errorf("tenant %s's file belongs to uid %d, outside tenant_uids", tenant, uid)
		}
		if wsUID, wsMode := owner(workspaceDir(s, tenant)); wsUID != uid || wsMode != 0o700 {
			t.Errorf("tenant %s's workspace: uid %d mode %v, want %d and 0700", tenant, wsUID, wsMode, uid)
		}
		if dUID, dMode := owner(filepath.Dir(workspaceDir(s, tenant))); dUID != 0 || dMode != 0o700 {
			t.Errorf("tenant %s's folder: uid %d mode %v, want root's, 0700 (file mode %v)", tenant, dUID, dMode, mode)
		}
		uids[tenant] = uid
	}
	if uids["t1"] == uids["t2"] {
		t.Errorf("tenants t1 and t2 share uid %d", uids["t1"])
	}

	count := func(want string) {
		t.Helper()
		r, _ := sbxJSON(t, s, "--tenant", "t1", "--session", "p", "--persistent", "-c", "n = globals().get('n', 0) + 1\nprint(n)")
		if r.ExitCode != 0 || r.Stdout != want {
			t.Fatalf("persistent count: %+v, want %q", r, want)
		}
	}
	count("1\n")
	count("2\n")
	time.Sleep(20 * time.Millisecond)
	mustCtl(t, s, "tenants", "gc", "--older-than", "10ms")
	if _, err := os.Stat(workspaceDir(s, "t1")); !os.IsNotExist(err) {
		t.Fatalf("t1's workspace after gc: %v", err)
	}
	// The old sandbox, had it survived, would still count on.
	count("1\n")
	if uid, _ := owner(workspaceDir(s, "t1")); uid == uids["t1"] {
		t.Errorf("the re-created t1 got the removed one's uid %d back at once", uid)
	}
}
