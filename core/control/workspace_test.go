package control

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace"
)

// testClock is a settable time source for the workspace manager.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serveWorkspaces serves the control API over a real workspace manager in a
// temporary data_dir, with the repository's skills/ shared. Tenant "quota"
// is declared with a 1 KiB disk quota.
func serveWorkspaces(t *testing.T) (cexecv1.ControlClient, *testClock) {
	t.Helper()
	m, clk := newWorkspaces(t)
	return serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Workspaces: m, DefaultTenant: endpoint.DefaultTenant}), clk
}

// newWorkspaces is serveWorkspaces' workspace manager.
func newWorkspaces(t *testing.T) (*workspace.Manager, *testClock) {
	t.Helper()
	shared, err := filepath.Abs("../../skills")
	if err != nil {
		t.Fatal(err)
	}
	clk := &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	m, err := workspace.New(workspace.Options{
		DataDir:         t.TempDir(),
		Tenants:         []*config.Tenant{{ID: "quota", DiskQuota: 1024}},
		SharedSkillsDir: shared,
		Logger:          hclog.NewNullLogger(),
		Now:             clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, clk
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if status.Code(err) != want {
		t.Errorf("%s: %v, want code %s", what, err, want)
	}
}

func TestState(t *testing.T) {
	c, _ := serveWorkspaces(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		req      *cexecv1.PutStateRequest
		code     codes.Code
		stored   string // bytes as stored, when code is OK
		asJSON   string // value as JSON
		readFrom string // tenant to read back as ("" = the request's)
	}{
		{name: "json", req: &cexecv1.PutStateRequest{Tenant: "a", Name: "progress.json", Data: []byte(`{"page": 3, "ids": [1, 2]}`)},
			stored: `{"page": 3, "ids": [1, 2]}`, asJSON: `{"page": 3, "ids": [1, 2]}`},
		{name: "yaml as stored", req: &cexecv1.PutStateRequest{Tenant: "a", Name: "conf.yaml", Data: []byte("b: 1\na: x\n")},
			stored: "b: 1\na: x\n", asJSON: `{"b":1,"a":"x"}`},
		{name: "json value into yaml", req: &cexecv1.PutStateRequest{Tenant: "a", Name: "conv.yml", Data: []byte(`{"z": 1.50, "a": [true]}`), FromJson: true},
			stored: "z: 1.50\na:\n  - true\n", asJSON: `{"z":1.50,"a":[true]}`},
		{name: "default tenant", req: &cexecv1.PutStateRequest{Name: "d.json", Data: []byte(`1`)},
			stored: `1`, asJSON: `1`, readFrom: "default"},
		{name: "not json", req: &cexecv1.PutStateRequest{Tenant: "a", Name: "bad.json", Data: []byte(`{nope`)}, code: codes.InvalidArgument},
		{name: "path in name", req: &cexecv1.PutStateRequest{Tenant: "a", Name: "../x.json", Data: []byte(`1`)}, code: codes.InvalidArgument},
		{name: "pickle refused", req: &cexecv1.PutStateRequest{Tenant: "a", Name: "x.pkl", Data: []byte(`1`)}, code: codes.InvalidArgument},
		{name: "bad tenant", req: &cexecv1.PutStateRequest{Tenant: "../a", Name: "x.json", Data: []byte(`1`)}, code: codes.InvalidArgument},
		{name: "over quota", req: &cexecv1.PutStateRequest{Tenant: "quota", Name: "big.json", Data: []byte(`"` + strings.Repeat("x", 2000) + `"`)}, code: codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := c.PutState(ctx, tt.req)
			wantCode(t, "put", err, tt.code)
			if tt.code != codes.OK {
				if _, err := c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: tt.req.Tenant, Name: tt.req.Name}); status.Code(err) != codes.NotFound && status.Code(err) != codes.InvalidArgument {
					t.Errorf("after a refused put, get: %v", err)
				}
				return
			}
			if r.GetState().GetName() != tt.req.Name || r.GetState().GetBytes() != int64(len(tt.stored)) {
				t.Errorf("put answered %v", r.GetState())
			}
			tenant := tt.req.Tenant
			if tt.readFrom != "" {
				tenant = tt.readFrom
			}
			g, err := c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: tenant, Name: tt.req.Name})
			if err != nil || string(g.GetData()) != tt.stored {
				t.Errorf("get = %q, %v; want %q", g.GetData(), err, tt.stored)
			}
			g, err = c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: tenant, Name: tt.req.Name, AsJson: true})
			if err != nil || compact(t, g.GetData()) != compact(t, []byte(tt.asJSON)) {
				t.Errorf("get as json = %s, %v; want %s", g.GetData(), err, tt.asJSON)
			}
		})
	}

	ls, err := c.ListState(ctx, &cexecv1.ListStateRequest{Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ls.GetStates() {
		names = append(names, s.GetName()+":"+s.GetFormat())
	}
	if got := strings.Join(names, " "); got != "conf.yaml:yaml conv.yml:yaml progress.json:json" {
		t.Errorf("ls = %s", got)
	}

	// Another tenant sees none of it.
	if _, err := c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: "b", Name: "progress.json"}); status.Code(err) != codes.NotFound {
		t.Errorf("tenant b reads a's state: %v", err)
	}
	if ls, err := c.ListState(ctx, &cexecv1.ListStateRequest{Tenant: "b"}); err != nil || len(ls.GetStates()) != 0 {
		t.Errorf("tenant b lists %v, %v", ls.GetStates(), err)
	}
	wantCode(t, "delete as b", func() error {
		_, err := c.DeleteState(ctx, &cexecv1.DeleteStateRequest{Tenant: "b", Name: "progress.json"})
		return err
	}(), codes.NotFound)

	if _, err := c.DeleteState(ctx, &cexecv1.DeleteStateRequest{Tenant: "a", Name: "progress.json"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: "a", Name: "progress.json"})
	wantCode(t, "get after delete", err, codes.NotFound)
	_, err = c.DeleteState(ctx, &cexecv1.DeleteStateRequest{Tenant: "a", Name: "progress.json"})
	wantCode(t, "second delete", err, codes.NotFound)
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.String()
}

func TestSessions(t *testing.T) {
	c, clk := serveWorkspaces(t)
	ctx := context.Background()
	for i, step := range []string{"fetched", "parsed"} {
		r, err := c.Checkpoint(ctx, &cexecv1.CheckpointRequest{Tenant: "a", Session: "s1", Step: step, ContextJson: []byte(`{"page":` + string(rune('1'+i)) + `}`)})
		if err != nil || r.GetSeq() != int64(i+1) || r.GetSession() != "s1" {
			t.Fatalf("checkpoint %s: %v, %v", step, r, err)
		}
		clk.Advance(time.Second)
	}
	if _, err := c.Checkpoint(ctx, &cexecv1.CheckpointRequest{Tenant: "a", Session: "s2", Step: "begun"}); err != nil {
		t.Fatal(err)
	}

	bad := []struct {
		name string
		req  *cexecv1.CheckpointRequest
		code codes.Code
	}{
		{"no session", &cexecv1.CheckpointRequest{Tenant: "a", Step: "x"}, codes.InvalidArgument},
		{"bad session id", &cexecv1.CheckpointRequest{Tenant: "a", Session: "../s1", Step: "x"}, codes.InvalidArgument},
		{"context not json", &cexecv1.CheckpointRequest{Tenant: "a", Session: "s1", Step: "x", ContextJson: []byte("{")}, codes.InvalidArgument},
		{"context too large", &cexecv1.CheckpointRequest{Tenant: "a", Session: "s1", Step: "x", ContextJson: []byte(`"` + strings.Repeat("x", workspace.MaxCheckpointSize) + `"`)}, codes.InvalidArgument},
	}
	for _, tt := range bad {
		_, err := c.Checkpoint(ctx, tt.req)
		wantCode(t, tt.name, err, tt.code)
	}

	ls, err := c.ListSessions(ctx, &cexecv1.ListSessionsRequest{Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.GetSessions()) != 2 || ls.GetSessions()[0].GetId() != "s2" {
		t.Fatalf("sessions = %v (want s2, the most recent, first)", ls.GetSessions())
	}
	s1 := ls.GetSessions()[1]
	if s1.GetId() != "s1" || s1.GetEntries() != 2 || s1.GetCheckpoints() != 2 || s1.GetLastCheckpoint() != "parsed" || s1.GetLastUnixMs() <= s1.GetStartedUnixMs() {
		t.Errorf("s1 = %v", s1)
	}

	g, err := c.GetSession(ctx, &cexecv1.GetSessionRequest{Tenant: "a", Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	es := g.GetEntries()
	if len(es) != 2 || g.GetSkipped() != 0 {
		t.Fatalf("log = %v, skipped %d", es, g.GetSkipped())
	}
	if e := es[1]; e.GetSeq() != 2 || e.GetKind() != workspace.KindCheckpoint || e.GetStep() != "parsed" || string(e.GetContextJson()) != `{"page":2}` || e.GetTimeUnixMs() <= es[0].GetTimeUnixMs() {
		t.Errorf("entry 2 = %v", e)
	}

	r, err := c.ResumeSession(ctx, &cexecv1.ResumeSessionRequest{Tenant: "a", Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if cp := r.GetCheckpoint(); cp.GetStep() != "parsed" || string(cp.GetContextJson()) != `{"page":2}` || len(r.GetRecent()) != 2 || r.GetSession().GetId() != "s1" {
		t.Errorf("resume = %v", r)
	}

	for _, call := range []struct {
		name string
		fn   func() error
	}{
		{"resume as another tenant", func() error {
			_, err := c.ResumeSession(ctx, &cexecv1.ResumeSessionRequest{Tenant: "b", Session: "s1"})
			return err
		}},
		{"show as another tenant", func() error {
			_, err := c.GetSession(ctx, &cexecv1.GetSessionRequest{Tenant: "b", Session: "s1"})
			return err
		}},
		{"unknown session", func() error {
			_, err := c.ResumeSession(ctx, &cexecv1.ResumeSessionRequest{Tenant: "a", Session: "nope"})
			return err
		}},
	} {
		wantCode(t, call.name, call.fn(), codes.NotFound)
	}
	if ls, err := c.ListSessions(ctx, &cexecv1.ListSessionsRequest{Tenant: "b"}); err != nil || len(ls.GetSessions()) != 0 {
		t.Errorf("tenant b lists sessions %v, %v", ls.GetSessions(), err)
	}
}

func TestSkills(t *testing.T) {
	m, _ := newWorkspaces(t)
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Workspaces: m, DefaultTenant: endpoint.DefaultTenant})
	ctx := context.Background()
	code := "def shout(text: str) -> str:\n    \"\"\"Upper-case text.\"\"\"\n    return text.upper()\n"
	r, err := c.SaveSkill(ctx, &cexecv1.SaveSkillRequest{Tenant: "a", Name: "shouter", Description: "Shout text", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetSkill().GetImport() != "skills.shouter" || r.GetSkill().GetShared() {
		t.Errorf("saved %v", r.GetSkill())
	}

	tests := []struct {
		name string
		req  *cexecv1.SaveSkillRequest
		code codes.Code
	}{
		{"syntax error", &cexecv1.SaveSkillRequest{Tenant: "a", Name: "broken", Description: "d", Code: "def f(:\n"}, codes.InvalidArgument},
		{"bad name", &cexecv1.SaveSkillRequest{Tenant: "a", Name: "Bad-Name", Description: "d", Code: "x = 1\n"}, codes.InvalidArgument},
		{"shadows a shared skill", &cexecv1.SaveSkillRequest{Tenant: "a", Name: "csv_report", Description: "d", Code: "x = 1\n"}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		_, err := c.SaveSkill(ctx, tt.req)
		wantCode(t, tt.name, err, tt.code)
	}

	list := func(tenant string) map[string]bool {
		t.Helper()
		ls, err := c.ListSkills(ctx, &cexecv1.ListSkillsRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, s := range ls.GetSkills() {
			out[s.GetName()] = s.GetShared()
		}
		return out
	}
	a, b := list("a"), list("b")
	for _, shared := range []string{"csv_report", "json_query", "text_diff"} {
		if !a[shared] || !b[shared] {
			t.Errorf("shared skill %s missing or not shared: a %v, b %v", shared, a, b)
		}
	}
	if shared, ok := a["shouter"]; !ok || shared {
		t.Errorf("a's skills %v lack its own shouter", a)
	}
	if _, ok := b["shouter"]; ok {
		t.Errorf("tenant b sees a's skill: %v", b)
	}

	// A folder whose SKILL.md sandboxed code broke is listed with why.
	ta, err := m.Tenant("a")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ta.WorkspaceDir(), "skills", "handmade")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("# Handmade\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ls, err := c.ListSkills(ctx, &cexecv1.ListSkillsRequest{Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var problem string
	for _, s := range ls.GetSkills() {
		if s.GetName() == "handmade" {
			problem = s.GetProblem()
		} else if s.GetProblem() != "" {
			t.Errorf("skill %s has a problem: %s", s.GetName(), s.GetProblem())
		}
	}
	if problem != "SKILL.md: no YAML front matter: the file must start with a --- line" {
		t.Errorf("handmade's problem %q", problem)
	}

	g, err := c.GetSkill(ctx, &cexecv1.GetSkillRequest{Tenant: "a", Name: "shouter"})
	if err != nil || g.GetSkill().GetCode() != code || g.GetSkill().GetDescription() != "Shout text" || !strings.Contains(g.GetSkill().GetInstructions(), "shout") {
		t.Errorf("get = %v, %v", g.GetSkill(), err)
	}
	_, err = c.GetSkill(ctx, &cexecv1.GetSkillRequest{Tenant: "b", Name: "shouter"})
	wantCode(t, "b gets a's skill", err, codes.NotFound)
	g, err = c.GetSkill(ctx, &cexecv1.GetSkillRequest{Tenant: "b", Name: "csv_report"})
	if err != nil || !g.GetSkill().GetShared() || !strings.Contains(g.GetSkill().GetCode(), "def ") {
		t.Errorf("shared skill = %v, %v", g.GetSkill(), err)
	}
}

func TestTenants(t *testing.T) {
	c, clk := serveWorkspaces(t)
	ctx := context.Background()
	for _, id := range []string{"old", "quota"} {
		if _, err := c.PutState(ctx, &cexecv1.PutStateRequest{Tenant: id, Name: "x.json", Data: []byte(`[1]`)}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(48 * time.Hour)
	if _, err := c.PutState(ctx, &cexecv1.PutStateRequest{Tenant: "fresh", Name: "x.json", Data: []byte(`[1]`)}); err != nil {
		t.Fatal(err)
	}

	ls, err := c.ListTenants(ctx, &cexecv1.ListTenantsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*cexecv1.TenantInfo{}
	for _, ti := range ls.GetTenants() {
		got[ti.GetId()] = ti
	}
	if len(got) != 3 || !got["quota"].GetDeclared() || got["quota"].GetDiskQuota() != 1024 || got["old"].GetDeclared() ||
		got["old"].GetDiskBytes() != 3 || got["fresh"].GetLastUsedUnixMs() <= got["old"].GetLastUsedUnixMs() {
		t.Errorf("tenants = %v", ls.GetTenants())
	}

	gc := func(age time.Duration, dry bool) []string {
		t.Helper()
		r, err := c.GCTenants(ctx, &cexecv1.GCTenantsRequest{OlderThanMs: age.Milliseconds(), DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ti := range r.GetRemoved() {
			ids = append(ids, ti.GetId())
		}
		return ids
	}
	// The declared tenant is as old but never collected.
	if ids := gc(24*time.Hour, true); strings.Join(ids, ",") != "old" {
		t.Errorf("dry run would remove %v, want [old]", ids)
	}
	if _, err := c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: "old", Name: "x.json"}); err != nil {
		t.Errorf("dry run removed data: %v", err)
	}
	clk.Advance(48 * time.Hour)
	if ids := gc(24*time.Hour, false); strings.Join(ids, ",") != "fresh,old" {
		t.Errorf("gc removed %v, want [fresh old]", ids)
	}
	if _, err := c.GetState(ctx, &cexecv1.GetStateRequest{Tenant: "old", Name: "x.json"}); status.Code(err) != codes.NotFound {
		t.Errorf("state of a collected tenant: %v", err)
	}
	_, err = c.GCTenants(ctx, &cexecv1.GCTenantsRequest{})
	wantCode(t, "gc without an age", err, codes.InvalidArgument)
}

// TestReadsCreateNoTenant: reads naming a tenant that is neither declared
// nor ever used (a mistyped --tenant) answer as for an empty tenant, or
// "no tenant", and leave no tenant behind; the default and declared
// tenants read as empty before their first use.
func TestReadsCreateNoTenant(t *testing.T) {
	m, _ := newWorkspaces(t)
	s := New(Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Workspaces: m, DefaultTenant: endpoint.DefaultTenant})
	ctx := context.Background()
	tests := []struct {
		name string
		// read returns how many items it listed.
		read     func(tenant string) (int, error)
		wantCode codes.Code
		wantN    int
		// wantErr is a part of the error's message.
		wantErr string
	}{
		{name: "state ls", read: func(tn string) (int, error) {
			r, err := s.ListState(ctx, &cexecv1.ListStateRequest{Tenant: tn})
			return len(r.GetStates()), err
		}},
		{name: "sessions ls", read: func(tn string) (int, error) {
			r, err := s.ListSessions(ctx, &cexecv1.ListSessionsRequest{Tenant: tn})
			return len(r.GetSessions()), err
		}},
		{name: "skills ls: the shared ones", read: func(tn string) (int, error) {
			r, err := s.ListSkills(ctx, &cexecv1.ListSkillsRequest{Tenant: tn})
			for _, sk := range r.GetSkills() {
				if !sk.GetShared() {
					return 0, fmt.Errorf("skill %s is not shared", sk.GetName())
				}
			}
			return len(r.GetSkills()), err
		}, wantN: 3},
		{name: "skills show of a shared skill", read: func(tn string) (int, error) {
			r, err := s.GetSkill(ctx, &cexecv1.GetSkillRequest{Tenant: tn, Name: "csv_report"})
			if err == nil && (!r.GetSkill().GetShared() || r.GetSkill().GetCode() == "") {
				return 0, fmt.Errorf("skill %v: want the shared one with its code", r.GetSkill())
			}
			return 0, err
		}},
		{name: "skills show of another", read: func(tn string) (int, error) {
			_, err := s.GetSkill(ctx, &cexecv1.GetSkillRequest{Tenant: tn, Name: "mine"})
			return 0, err
		}, wantCode: codes.NotFound, wantErr: "skill mine"},
		{name: "state get", read: func(tn string) (int, error) {
			_, err := s.GetState(ctx, &cexecv1.GetStateRequest{Tenant: tn, Name: "x.json"})
			return 0, err
		}, wantCode: codes.NotFound},
		{name: "state version", read: func(tn string) (int, error) {
			_, err := stateVersions{s: s}.LoadState(ctx, &cexecv1.LoadStateRequest{Tenant: tn, Name: "x.json"})
			return 0, err
		}, wantCode: codes.NotFound},
		{name: "state rm", read: func(tn string) (int, error) {
			_, err := s.DeleteState(ctx, &cexecv1.DeleteStateRequest{Tenant: tn, Name: "x.json"})
			return 0, err
		}, wantCode: codes.NotFound},
		{name: "sessions show", read: func(tn string) (int, error) {
			_, err := s.GetSession(ctx, &cexecv1.GetSessionRequest{Tenant: tn, Session: "s1"})
			return 0, err
		}, wantCode: codes.NotFound},
		{name: "sessions resume", read: func(tn string) (int, error) {
			_, err := s.ResumeSession(ctx, &cexecv1.ResumeSessionRequest{Tenant: tn, Session: "s1"})
			return 0, err
		}, wantCode: codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.read("ghost")
			if status.Code(err) != tt.wantCode || n != tt.wantN {
				t.Errorf("tenant ghost: %d items, %v; want %d, code %s", n, err, tt.wantN, tt.wantCode)
			}
			// An unknown tenant's own answer says so, unless the shared
			// skills answered.
			if want := cmp.Or(tt.wantErr, "no tenant ghost"); err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("tenant ghost: %v, want it to say %q", err, want)
			}
			if m.Exists("ghost") {
				t.Fatal("the read created tenant ghost")
			}
			// The default and a declared tenant exist before first use:
			// their answers are an empty tenant's, never "no tenant".
			for _, tn := range []string{"", "quota"} {
				if n, err := tt.read(tn); status.Code(err) != tt.wantCode || n != tt.wantN || err != nil && strings.Contains(err.Error(), "no tenant") {
					t.Errorf("tenant %q: %d items, %v; want %d, code %s", tn, n, err, tt.wantN, tt.wantCode)
				}
			}
		})
	}
}

func TestWorkspacesNotWired(t *testing.T) {
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}})
	ctx := context.Background()
	_, err := c.GetState(ctx, &cexecv1.GetStateRequest{Name: "x.json"})
	wantCode(t, "get state", err, codes.Unimplemented)
	_, err = c.ListTenants(ctx, &cexecv1.ListTenantsRequest{})
	wantCode(t, "list tenants", err, codes.Unimplemented)
}

// TestEntryProto checks that every field of a logged execution reaches the
// API.
func TestEntryProto(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := &workspace.Entry{Seq: 3, Time: at, Kind: workspace.KindExecution, Task: "t", Code: "print(1)",
		Result: &workspace.Result{OK: false, ExitCode: 1, ErrorType: "ValueError", Error: "bad", Output: "1\n", Value: json.RawMessage(`[1]`), TimedOut: true},
		ToolCalls: []workspace.ToolCall{{Server: "s", Tool: "x", Duration: workspace.Duration(1500 * time.Microsecond), OK: false, Error: "e",
			Approval: "denied by an operator"}},
		UpstreamLog: []workspace.UpstreamLog{{Server: "s", Level: "info", Logger: "l", Data: json.RawMessage(`"m"`), Truncated: true, Withheld: true}},
		Duration:    workspace.Duration(2 * time.Millisecond), StateFiles: []string{"a.json"}, Truncated: true}
	want := &cexecv1.SessionEntry{Seq: 3, TimeUnixMs: at.UnixMilli(), Kind: "execution", Task: "t", Code: "print(1)",
		Result:      &cexecv1.SessionResult{ExitCode: 1, ErrorType: "ValueError", Error: "bad", Output: "1\n", ValueJson: []byte(`[1]`), TimedOut: true},
		ToolCalls:   []*cexecv1.SessionToolCall{{Server: "s", Tool: "x", DurationMs: 1.5, Error: "e", Approval: "denied by an operator"}},
		UpstreamLog: []*cexecv1.SessionUpstreamLog{{Server: "s", Level: "info", Logger: "l", DataJson: []byte(`"m"`), Truncated: true, Withheld: true}},
		DurationMs:  2, StateFiles: []string{"a.json"}, Truncated: true}
	if got := entryProto(e); !proto.Equal(got, want) {
		t.Errorf("entryProto =\n%v\nwant\n%v", got, want)
	}
}
