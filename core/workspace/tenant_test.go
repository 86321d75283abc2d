package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestTenantLayout(t *testing.T) {
	shared := t.TempDir()
	m := newManager(t, Options{SharedSkillsDir: shared})
	tn := mustTenant(t, m, "acme")
	root := filepath.Join(m.opts.DataDir, "tenants", "acme")
	for _, d := range []string{"", "workspace", "workspace/state", "workspace/skills", "sessions"} {
		st, err := os.Stat(filepath.Join(root, d))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s/%s: %v, mode %v; want a 0700 folder", root, d, err, st.Mode())
		}
	}
	if tn.WorkspaceDir() != filepath.Join(root, "workspace") || tn.ID() != "acme" || tn.Declared() {
		t.Errorf("handle: %s %s %v", tn.WorkspaceDir(), tn.ID(), tn.Declared())
	}
	want := []sandbox.Mount{
		{Source: filepath.Join(root, "workspace"), Target: "/workspace"},
		{Source: shared, Target: "/cexec/skills", ReadOnly: true},
	}
	if got := tn.Mounts(); !slices.Equal(got, want) {
		t.Errorf("Mounts = %+v, want %+v", got, want)
	}
	if again := mustTenant(t, m, "acme"); again != tn {
		t.Error("Tenant returned a new handle for a loaded tenant")
	}
	for _, bad := range []string{"../acme", "", "Acme", "a/b"} {
		if _, err := m.Tenant(bad); !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("Tenant(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(m.opts.DataDir, "tenants"))
	if len(entries) != 1 {
		t.Errorf("bad ids created folders: %v", entries)
	}
}

func TestNewChecksOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"relative data dir", Options{DataDir: "data"}},
		{"relative shared skills", Options{DataDir: t.TempDir(), SharedSkillsDir: "skills"}},
		{"bad declared tenant", Options{DataDir: t.TempDir(), Tenants: []*config.Tenant{{ID: "-x"}}}},
	}
	for _, tc := range tests {
		if _, err := New(tc.opts); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
	m, err := New(OptionsFromConfig(&config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}}))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := m.Tenant("a"); !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("Tenant after Close = %v", err)
	}
}

func TestQuotasFromConfig(t *testing.T) {
	m := newManager(t, Options{
		Tenants:      []*config.Tenant{{ID: "acme", DiskQuota: 1 << 20, MaxConcurrent: 2, AllowedServers: []string{"filesystem"}}},
		DefaultQuota: Quota{MaxConcurrent: 1},
	})
	acme := mustTenant(t, m, "acme")
	if !acme.Declared() || acme.Quota().DiskBytes != 1<<20 {
		t.Errorf("acme quota = %+v", acme.Quota())
	}
	if !acme.Allowed("filesystem") || acme.Allowed("github") || acme.Allowed("") {
		t.Error("acme's allowed_servers not applied")
	}
	other := mustTenant(t, m, "other")
	if !other.Allowed("github") || other.Quota().MaxConcurrent != 1 {
		t.Errorf("undeclared tenant quota = %+v", other.Quota())
	}

	r1, err := acme.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := acme.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	_, err = acme.Acquire()
	if !errors.Is(err, ErrTooManyExecutions) || !strings.Contains(err.Error(), "2 of its 2") {
		t.Fatalf("third Acquire = %v", err)
	}
	if _, err := other.Acquire(); err != nil {
		t.Fatalf("another tenant's slots are separate: %v", err)
	}
	r1()
	r1() // a second release does nothing
	if acme.Running() != 1 {
		t.Fatalf("Running = %d after a double release, want 1", acme.Running())
	}
	r3, err := acme.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	r2()
	r3()
	if acme.Running() != 0 {
		t.Errorf("Running = %d", acme.Running())
	}

	strict := newManager(t, Options{DeclaredOnly: true, Tenants: []*config.Tenant{{ID: "acme"}}})
	if _, err := strict.Tenant("acme"); err != nil {
		t.Errorf("declared tenant refused: %v", err)
	}
	if _, err := strict.Tenant("other"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("DeclaredOnly let an undeclared tenant in: %v", err)
	}
}

func TestTenantsList(t *testing.T) {
	clk := newClock()
	m := newManager(t, Options{Now: clk.Now, Tenants: []*config.Tenant{{ID: "declared", DiskQuota: 5}}})
	tn := mustTenant(t, m, "busy")
	tn.SaveState("a.json", json.RawMessage(`[1,2,3]`))
	tn.Append("s1", Entry{Kind: KindExecution})
	tn.Append("s2", Entry{Kind: KindExecution})
	release, _ := tn.Acquire()
	defer release()
	os.Mkdir(filepath.Join(m.opts.DataDir, "tenants", ".gc-junk"), 0o700)

	list, err := m.Tenants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "busy" || list[1].ID != "declared" {
		t.Fatalf("Tenants = %+v", list)
	}
	busy, decl := list[0], list[1]
	if !busy.Exists || busy.Declared || busy.Running != 1 || busy.Sessions != 2 || busy.DiskBytes != 7 || !busy.LastUsed.Equal(clk.Now()) {
		t.Errorf("busy = %+v", busy)
	}
	if decl.Exists || !decl.Declared || decl.Quota.DiskBytes != 5 {
		t.Errorf("declared = %+v", decl)
	}
}

func TestGC(t *testing.T) {
	clk := newClock()
	dataDir := t.TempDir()
	day := 24 * time.Hour

	// A previous daemon used "ancient", "declared" and the default tenant
	// (what every command and MCP client uses without --tenant) long ago.
	prev := newManager(t, Options{DataDir: dataDir, Now: clk.Now})
	for _, id := range []string{"ancient", "declared", "default"} {
		mustTenant(t, prev, id).SaveState("x.json", json.RawMessage(`1`))
	}
	prev.Close()
	clk.Advance(30 * day)

	m := newManager(t, Options{DataDir: dataDir, Now: clk.Now, Tenants: []*config.Tenant{{ID: "declared"}}})
	old := mustTenant(t, m, "old")
	old.Append("s", Entry{Kind: KindExecution})
	running := mustTenant(t, m, "running")
	release, err := running.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * day)
	mustTenant(t, m, "recent").SaveState("x.json", json.RawMessage(`2`))

	if _, err := m.GC(context.Background(), 0, true); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("GC with age 0 = %v", err)
	}
	ids := func(es []GCEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	dry, err := m.GC(context.Background(), 7*day, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(dry); !slices.Equal(got, []string{"ancient", "old"}) {
		t.Fatalf("dry run = %v, want [ancient old]", got)
	}
	if dry[0].DiskBytes != 1 || !dry[0].LastUsed.Equal(clk.Now().Add(-40*day)) {
		t.Errorf("dry run entry = %+v", dry[0])
	}
	for _, id := range []string{"ancient", "old"} {
		if _, err := os.Stat(filepath.Join(dataDir, "tenants", id)); err != nil {
			t.Errorf("dry run removed %s", id)
		}
	}

	removed, err := m.GC(context.Background(), 7*day, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(removed); !slices.Equal(got, []string{"ancient", "old"}) {
		t.Fatalf("GC removed %v, want [ancient old]", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dataDir, "tenants"))
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{"declared", "default", "recent", "running"}) {
		t.Errorf("left after GC: %v", left)
	}
	if _, err := old.ListSessions(); !errors.Is(err, ErrTenantRemoved) {
		t.Errorf("stale handle after GC = %v, want ErrTenantRemoved", err)
	}
	if _, err := old.Acquire(); !errors.Is(err, ErrTenantRemoved) {
		t.Errorf("Acquire on a removed tenant = %v", err)
	}
	fresh := mustTenant(t, m, "old")
	if list, err := fresh.ListSessions(); err != nil || len(list) != 0 {
		t.Errorf("recreated tenant sees old sessions: %v %v", list, err)
	}

	// Once its execution ends and time passes, "running" goes too.
	release()
	clk.Advance(8 * day)
	removed, _ = m.GC(context.Background(), 7*day, false)
	if got := ids(removed); !slices.Contains(got, "running") || slices.Contains(got, "declared") {
		t.Errorf("second GC removed %v", got)
	}
}

func TestLastUsedPersisted(t *testing.T) {
	clk := newClock()
	dataDir := t.TempDir()
	m1 := newManager(t, Options{DataDir: dataDir, Now: clk.Now})
	tn := mustTenant(t, m1, "acme")
	created := clk.Now()
	clk.Advance(10 * time.Second)
	tn.Append("s", Entry{Kind: KindExecution}) // within a minute: not written yet
	if tn.LastUsed() != clk.Now() {
		t.Errorf("LastUsed = %v", tn.LastUsed())
	}
	clk.Advance(2 * time.Minute)
	tn.SaveState("x.json", json.RawMessage(`1`))
	persisted := clk.Now()
	clk.Advance(10 * time.Second)
	tn.Append("s", Entry{Kind: KindExecution})
	m1.Close()

	m2 := newManager(t, Options{DataDir: dataDir, Now: clk.Now})
	list, err := m2.Tenants(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
	if !list[0].Created.Equal(created) || !list[0].LastUsed.Equal(persisted) {
		t.Errorf("after restart: created %v last used %v; want %v, %v", list[0].Created, list[0].LastUsed, created, persisted)
	}
}

func TestLeftoversRemoved(t *testing.T) {
	dataDir := t.TempDir()
	m := newManager(t, Options{DataDir: dataDir})
	tn := mustTenant(t, m, "acme")
	ws := tn.WorkspaceDir()
	m.Close()
	// What a crash leaves: a half-removed tenant and half-written files.
	writeFile(t, filepath.Join(dataDir, "tenants", ".gc-old-1234", "workspace", "x"), []byte("x"))
	writeFile(t, filepath.Join(ws, "state", tempPrefix+"a.json-1"), []byte("{"))
	writeFile(t, filepath.Join(ws, "skills", tempPrefix+"s-1", "SKILL.md"), []byte("x"))
	writeFile(t, filepath.Join(ws, "state", ".mine"), []byte("sandboxed code's own dotfile"))

	m2 := newManager(t, Options{DataDir: dataDir})
	mustTenant(t, m2, "acme")
	for _, p := range []string{
		filepath.Join(dataDir, "tenants", ".gc-old-1234"),
		filepath.Join(ws, "state", tempPrefix+"a.json-1"),
		filepath.Join(ws, "skills", tempPrefix+"s-1"),
	} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived a restart", p)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "state", ".mine")); err != nil {
		t.Errorf("a dotfile of sandboxed code was removed: %v", err)
	}
}

func TestIsolation(t *testing.T) {
	m := newManager(t, Options{})
	a, b := mustTenant(t, m, "a"), mustTenant(t, m, "b")
	a.SaveState("s.json", json.RawMessage(`"a's"`))
	a.Append("shared-name", Entry{Kind: KindExecution, Code: "a's code"})
	if _, err := a.SaveSkill(context.Background(), "only_a", "A's skill.", "def f():\n    return 1\n"); err != nil {
		t.Fatal(err)
	}

	if _, err := b.GetState("s.json"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("b sees a's state: %v", err)
	}
	if list, _ := b.ListState(); len(list) != 0 {
		t.Errorf("b lists a's state: %v", list)
	}
	if _, err := b.ReadSession("shared-name"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("b reads a's session: %v", err)
	}
	if list, _ := b.ListSessions(); len(list) != 0 {
		t.Errorf("b lists a's sessions: %v", list)
	}
	if _, err := b.GetSkill("only_a"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("b gets a's skill: %v", err)
	}
	if list, _ := b.ListSkills(); len(list) != 0 {
		t.Errorf("b lists a's skills: %v", list)
	}
	if _, err := m.HandleHostCall(context.Background(), "b", "x", MethodGetState, json.RawMessage(`{"name":"s.json"}`)); err == nil {
		t.Error("b's host call read a's state")
	}
	b.SaveState("s.json", json.RawMessage(`"b's"`))
	if v, _ := a.GetState("s.json"); string(v) != `"a's"` {
		t.Errorf("b's write changed a's state: %s", v)
	}
}

// TestOwner runs when cexecd's situation is root handing workspaces to an
// unprivileged sandbox user: that user reads and writes its workspace and
// nothing else of the tenant's.
func TestOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand files to another user")
	}
	const nobody = 65534
	dataDir := t.TempDir()
	// Let the sandbox user through the test's own temporary folders.
	for d := dataDir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	m := newManager(t, Options{DataDir: dataDir, Owner: &Owner{UID: nobody, GID: nobody}})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.SaveState("x.json", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.SaveSkill(context.Background(), "sk", "A skill.", "x = 1\n"); err != nil {
		t.Fatal(err)
	}
	tn.Append("s", Entry{Kind: KindExecution})
	owner := func(p string) (uint32, os.FileMode) {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Uid, st.Mode().Perm()
	}
	ws := tn.WorkspaceDir()
	for _, p := range []string{ws, ws + "/state", ws + "/skills", ws + "/state/x.json", ws + "/skills/sk", ws + "/skills/sk/SKILL.md", ws + "/skills/sk/__init__.py"} {
		if uid, _ := owner(p); uid != nobody {
			t.Errorf("%s owned by %d, want %d", p, uid, nobody)
		}
	}
	for p, want := range map[string]os.FileMode{tn.dir: 0o711, filepath.Dir(tn.dir): 0o711, tn.dir + "/sessions": 0o700, tn.dir + "/sessions/s.jsonl": 0o600} {
		if uid, mode := owner(p); uid != 0 || mode != want {
			t.Errorf("%s: owner %d mode %v, want root and %v", p, uid, mode, want)
		}
	}

	// As the sandbox user: the workspace works, the session logs do not.
	script := `
import json, os, sys
ws, sessions = sys.argv[1], sys.argv[2]
print(json.load(open(ws + "/state/x.json"))["a"])
json.dump({"b": 2}, open(ws + "/state/y.json", "w"))
try:
    os.listdir(sessions)
    print("sessions readable")
except PermissionError:
    print("sessions private")
`
	cmd := exec.Command(DefaultPython, "-I", "-c", script, ws, tn.dir+"/sessions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "1\nsessions private\n" {
		t.Fatalf("as the sandbox user: %v\n%s", err, out)
	}
	if v, err := tn.GetState("y.json"); err != nil || string(v) != `{"b": 2}` {
		t.Errorf("GetState(y.json) = %s, %v", v, err)
	}
}

// TestClosedTenantHoldsNoDescriptors: a tenant keeps folders open while
// loaded (its sessions, its audit log); closing it must close them all, or
// an image stays attached, lazily unmounted, until cexecd exits.
func TestClosedTenantHoldsNoDescriptors(t *testing.T) {
	dataDir := t.TempDir()
	m := newManager(t, Options{DataDir: dataDir})
	ten := mustTenant(t, m, "a")
	if _, err := ten.Append("s", Entry{Kind: KindExecution}); err != nil {
		t.Fatal(err)
	}
	if _, err := ten.ListSessions(); err != nil {
		t.Fatal(err)
	}
	if err := m.WithAuditDir("a", func(dir *os.Root) error { return dir.WriteFile("audit.jsonl", []byte("{}\n"), 0o600) }); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(dataDir, "tenants", "a")
	open := func() []string {
		var out []string
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if p, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && (p == under || strings.HasPrefix(p, under+"/")) {
				out = append(out, p)
			}
		}
		return out
	}
	if len(open()) == 0 {
		t.Fatal("a loaded tenant holds no folder open: this test cannot see a leak")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if left := open(); len(left) > 0 {
		t.Errorf("descriptors left open after the tenant closed: %q", left)
	}
}
