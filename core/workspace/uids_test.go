package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
)

// TestTenantUIDs allocates one uid per tenant from the range, keeps it
// across restarts, refuses a tenant when the range is full and gives a
// removed tenant's uid out again only after the rest of the range.
func TestTenantUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand workspaces to tenant users")
	}
	dataDir := t.TempDir()
	clk := newClock()
	var removed []string
	opts := Options{DataDir: dataDir, TenantUIDs: &config.IDRange{First: 300000, Last: 300002}, Now: clk.Now,
		OnRemove: func(id string) { removed = append(removed, id) }}
	m := newManager(t, opts)
	uidOf := func(m *Manager, id string) int {
		t.Helper()
		o := mustTenant(t, m, id).Owner()
		if o == nil || o.GID != o.UID {
			t.Fatalf("tenant %s: owner %+v, want its own uid and gid", id, o)
		}
		return o.UID
	}
	for _, tt := range []struct {
		id   string
		want int
	}{{"a", 300000}, {"b", 300001}, {"a", 300000}, {"c", 300002}} {
		if got := uidOf(m, tt.id); got != tt.want {
			t.Errorf("tenant %s: uid %d, want %d", tt.id, got, tt.want)
		}
	}
	if _, err := m.Tenant("d"); !errors.Is(err, pluginapi.ErrResourceExhausted) {
		t.Fatalf("fourth tenant in a range of three: %v, want ErrResourceExhausted", err)
	}
	m.Close()

	// A restart keeps every tenant's uid, however the tenants are opened.
	m = newManager(t, opts)
	for id, want := range map[string]int{"c": 300002, "b": 300001, "a": 300000} {
		if got := uidOf(m, id); got != want {
			t.Errorf("after restart: tenant %s has uid %d, want %d", id, got, want)
		}
	}
	// Touching the tenant rewrites tenant.json; the uid stays in it.
	clk.Advance(2 * touchEvery)
	if _, err := mustTenant(t, m, "b").SaveState("x.json", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(48 * time.Hour)
	for _, id := range []string{"a", "c"} {
		if _, err := mustTenant(t, m, id).SaveState("x.json", json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.GC(context.Background(), 24*time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "b" {
		t.Fatalf("OnRemove got %v, want [b]", removed)
	}
	if got := uidOf(m, "d"); got != 300001 {
		t.Errorf("tenant d after b's removal: uid %d, want b's 300001, the only free one", got)
	}
}

// TestTenantUsersSeparate checks, with real processes running as other
// users, that a tenant's workspace and state are its own: another
// tenant's user and nobody can neither read nor write them, and the
// tenant's folders above the workspace stay cexecd's and closed.
func TestTenantUsersSeparate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand workspaces to tenant users")
	}
	m := newManager(t, Options{TenantUIDs: &config.IDRange{First: 300100, Last: 300199}})
	a, b := mustTenant(t, m, "a"), mustTenant(t, m, "b")
	if _, err := a.SaveState("secret.json", json.RawMessage(`"a's"`)); err != nil {
		t.Fatal(err)
	}
	a.Append("s", Entry{Kind: KindExecution})
	modes := map[string]os.FileMode{
		filepath.Dir(a.dir): 0o700, a.dir: 0o700, a.dir + "/sessions": 0o700, a.dir + "/" + tenantFile: 0o600,
		a.WorkspaceDir(): 0o700, a.WorkspaceDir() + "/state": 0o700, a.WorkspaceDir() + "/state/secret.json": 0o600,
	}
	for p, want := range modes {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}

	own := a.Owner()
	script := `
import os, sys
for p in sys.argv[1:]:
    try:
        if p.endswith("/new"):
            open(p, "w").close()
        elif os.path.isdir(p):
            os.listdir(p)
        else:
            open(p).read()
        print("reached", p)
    except OSError as e:
        print("refused", e.errno)
`
	targets := []string{a.WorkspaceDir(), a.WorkspaceDir() + "/state/secret.json", a.WorkspaceDir() + "/new",
		a.dir + "/" + tenantFile, a.dir + "/sessions"}
	for _, tt := range []struct {
		name string
		uid  uint32
	}{{"tenant b's user", uint32(b.Owner().UID)}, {"nobody", 65534}} {
		cmd := exec.Command(DefaultPython, append([]string{"-I", "-c", script}, targets...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tt.uid, Gid: tt.uid, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("as %s: %v\n%s", tt.name, err, out)
		}
		want := "refused 13\nrefused 13\nrefused 13\nrefused 13\nrefused 13\n"
		if string(out) != want {
			t.Errorf("as %s:\n%s\nwant every access refused (EACCES)", tt.name, out)
		}
	}
	// The tenant's own user reaches its state through the workspace (as
	// its sandbox, which is bound there, does), not the rest.
	cmd := exec.Command(DefaultPython, "-I", "-c", `
import os, sys
print(open(sys.argv[1] + "/state/secret.json").read())
open(sys.argv[1] + "/mine", "w").close()
`, a.WorkspaceDir())
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(own.UID), Gid: uint32(own.GID), Groups: []uint32{}}}
	// Its own user must get past the closed folders above the workspace
	// as a sandbox backend running as root does for it: here through a
	// descriptor of the workspace opened by root.
	ws, err := os.Open(a.WorkspaceDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	cmd.ExtraFiles = []*os.File{ws}
	cmd.Args[len(cmd.Args)-1] = "/proc/self/fd/3"
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "\"a's\"\n" {
		t.Errorf("as tenant a's own user: %v\n%s", err, out)
	}
}

// TestTenantUIDHandOver gives a tenant from before tenant_uids (its
// workspace nobody's) its own uid, and the whole workspace with it,
// symlinks included but never what they point to.
func TestTenantUIDHandOver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand workspaces to tenant users")
	}
	dataDir := t.TempDir()
	m := newManager(t, Options{DataDir: dataDir, Owner: &Owner{UID: 65534, GID: 65534}})
	old := mustTenant(t, m, "old")
	if _, err := old.SaveState("x.json", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dataDir, "outside")
	writeFile(t, outside, []byte("host"))
	writeFile(t, old.WorkspaceDir()+"/deep/er/file", []byte("x"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, old.WorkspaceDir()+"/link"))
	must(os.Lchown(old.WorkspaceDir()+"/link", 65534, 65534))
	m.Close()

	m = newManager(t, Options{DataDir: dataDir, TenantUIDs: &config.IDRange{First: 300200, Last: 300209}})
	tn := mustTenant(t, m, "old")
	if o := tn.Owner(); o == nil || o.UID != 300200 {
		t.Fatalf("owner %+v, want uid 300200", o)
	}
	ws := tn.WorkspaceDir()
	for _, p := range []string{ws, ws + "/state", ws + "/state/x.json", ws + "/deep", ws + "/deep/er/file", ws + "/link"} {
		st, err := os.Lstat(p)
		must(err)
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 300200 {
			t.Errorf("%s belongs to %d after the hand-over, want 300200", p, uid)
		}
	}
	st, err := os.Stat(outside)
	must(err)
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("the symlink's target outside the workspace was handed over too (uid %d)", uid)
	}
}
