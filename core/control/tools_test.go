package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/pluginapi"
)

type fakeTools struct {
	servers    []catalog.ServerStatus
	tools      []catalog.Tool
	refreshErr error
	refreshed  []string
}

func (f *fakeTools) Servers() []catalog.ServerStatus { return f.servers }
func (f *fakeTools) Tools() []catalog.Tool           { return f.tools }
func (f *fakeTools) Tool(server, name string) (catalog.Tool, bool) {
	for _, t := range f.tools {
		if t.Server == server && t.Name == name {
			return t, true
		}
	}
	return catalog.Tool{}, false
}
func (f *fakeTools) StubSource(id string) ([]byte, bool) {
	return []byte("# stub " + id + "\nfrom cexec import call_tool\n"), true
}
func (f *fakeTools) Refresh(_ context.Context, server string) error {
	f.refreshed = append(f.refreshed, server)
	return f.refreshErr
}

func newFakeTools() *fakeTools {
	yes := true
	return &fakeTools{
		servers: []catalog.ServerStatus{
			{Name: "filesystem", Transport: "stdio", State: catalog.StateReady, ProtocolVersion: "2025-11-25", ServerName: "secure-filesystem-server", PID: 77, Tools: 2},
			{Name: "memory", Transport: "stdio", State: catalog.StateBackoff, Optional: true, Restarts: 3, LastError: "exit status 1"},
		},
		tools: []catalog.Tool{
			{ID: "filesystem/read_text_file", Server: "filesystem", Name: "read_text_file", Description: "Read a file",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
				Annotations: stubgen.Annotations{ReadOnlyHint: &yes},
				Stub:        catalog.StubInfo{Import: "from servers.filesystem import read_text_file", Signature: "read_text_file(*, path: str) -> Any"}},
			{ID: "filesystem/list_directory", Server: "filesystem", Name: "list_directory"},
			{ID: "textutils/word_count", Server: "textutils", Name: "word_count", Local: &catalog.LocalInfo{Source: "def word_count(text): ..."}},
		},
	}
}

type fakeSearch struct {
	got search.Request
	err error
}

func (f *fakeSearch) Search(_ context.Context, req search.Request) (search.Response, error) {
	f.got = req
	if f.err != nil {
		return search.Response{}, f.err
	}
	return search.Response{
		Hits:     []search.Hit{{ID: "filesystem/read_text_file", Kind: search.KindTool, Score: 2.5, Server: "filesystem", Name: "read_text_file", Import: "from servers.filesystem import read_text_file", StubSource: "src", InputSchema: json.RawMessage(`{}`)}},
		Warnings: []string{"fell back"},
	}, nil
}

func TestListServersAndTools(t *testing.T) {
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Tools: newFakeTools()})
	ctx := context.Background()
	srv, err := c.ListServers(ctx, &cexecv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range srv.GetServers() {
		got = append(got, fmt.Sprintf("%s %s %s %d %d", s.GetName(), s.GetTransport(), s.GetState(), s.GetTools(), s.GetPid()))
	}
	want := []string{"filesystem stdio ok 2 77", "memory stdio failed 0 0", "textutils local ok 1 0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("servers %q, want %q", got, want)
	}
	if m := srv.GetServers()[1]; !m.GetOptional() || m.GetRestarts() != 3 || m.GetLastError() != "exit status 1" {
		t.Errorf("memory %v", m)
	}

	for _, tc := range []struct {
		server string
		want   []string
		code   codes.Code
		msg    string
	}{
		{"", []string{"filesystem/read_text_file", "filesystem/list_directory", "textutils/word_count"}, codes.OK, ""},
		{"filesystem", []string{"filesystem/read_text_file", "filesystem/list_directory"}, codes.OK, ""},
		{"textutils", []string{"textutils/word_count"}, codes.OK, ""},
		{"memory", nil, codes.OK, ""},
		{"github", nil, codes.NotFound, `unknown server "github" (servers: filesystem, memory, textutils)`},
	} {
		r, err := c.ListTools(ctx, &cexecv1.ListToolsRequest{Server: tc.server})
		if status.Code(err) != tc.code || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("ListTools(%q): %v, want %v %q", tc.server, err, tc.code, tc.msg)
			continue
		}
		var ids []string
		for _, x := range r.GetTools() {
			ids = append(ids, x.GetId())
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("ListTools(%q) = %v, want %v", tc.server, ids, tc.want)
		}
	}
}

func TestGetTool(t *testing.T) {
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Tools: newFakeTools()})
	ctx := context.Background()
	r, err := c.GetTool(ctx, &cexecv1.GetToolRequest{Id: "filesystem/read_text_file"})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetTool().GetImport() != "from servers.filesystem import read_text_file" || !strings.Contains(r.GetStubSource(), "call_tool") ||
		!strings.Contains(string(r.GetInputSchemaJson()), `"path"`) || !strings.Contains(string(r.GetAnnotationsJson()), `"readOnlyHint":true`) {
		t.Errorf("GetTool = %v", r)
	}
	local, err := c.GetTool(ctx, &cexecv1.GetToolRequest{Id: "textutils/word_count"})
	if err != nil || !local.GetTool().GetLocal() || local.GetAnnotationsJson() != nil {
		t.Errorf("local tool: %v %v", local, err)
	}
	for _, tc := range []struct {
		id   string
		code codes.Code
		msg  string
	}{
		{"read_text_file", codes.InvalidArgument, "want server/tool"},
		{"filesystem/", codes.InvalidArgument, "want server/tool"},
		{"filesystem/read_txt_file", codes.NotFound, `server filesystem has no tool "read_txt_file"; closest: filesystem/read_text_file, filesystem/list_directory`},
		{"memory/read_graph", codes.NotFound, "server memory has no tools (yet)"},
		{"github/issues", codes.NotFound, `unknown server "github"`},
	} {
		_, err := c.GetTool(ctx, &cexecv1.GetToolRequest{Id: tc.id})
		if status.Code(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("GetTool(%q): %v, want %v %q", tc.id, err, tc.code, tc.msg)
		}
	}
}

func TestRefreshTools(t *testing.T) {
	ft := newFakeTools()
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Tools: ft})
	ctx := context.Background()
	for _, tc := range []struct {
		server string
		err    error
		tools  int32
		code   codes.Code
	}{
		{"", nil, 3, codes.OK},
		{"filesystem", nil, 2, codes.OK},
		{"nope", nil, 0, codes.NotFound},
		{"memory", fmt.Errorf("refresh memory: %w: server memory is backoff", catalog.ErrUnavailable), 0, codes.FailedPrecondition},
		{"memory", fmt.Errorf("refresh memory: %w", catalog.ErrTimeout), 0, codes.DeadlineExceeded},
	} {
		ft.refreshErr = tc.err
		r, err := c.RefreshTools(ctx, &cexecv1.RefreshToolsRequest{Server: tc.server})
		if status.Code(err) != tc.code || r.GetTools() != tc.tools {
			t.Errorf("RefreshTools(%q) = %v, %v; want %d tools, %v", tc.server, r, err, tc.tools, tc.code)
		}
	}
	if strings.Join(ft.refreshed, ",") != ",filesystem,memory,memory" {
		t.Errorf("refreshed %q", ft.refreshed)
	}
}

func TestSearchTools(t *testing.T) {
	fs := &fakeSearch{}
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}, Search: fs})
	ctx := context.Background()
	r, err := c.SearchTools(ctx, &cexecv1.SearchToolsRequest{Query: "read a file", DetailLevel: "full", Limit: 3, Servers: []string{"filesystem"}})
	if err != nil {
		t.Fatal(err)
	}
	if fs.got.Query != "read a file" || fs.got.Detail != "full" || fs.got.Limit != 3 || strings.Join(fs.got.Servers, ",") != "filesystem" {
		t.Errorf("request %+v", fs.got)
	}
	h := r.GetHits()
	if len(h) != 1 || h[0].GetId() != "filesystem/read_text_file" || h[0].GetKind() != "tool" || h[0].GetScore() != 2.5 ||
		h[0].GetStubSource() != "src" || string(h[0].GetInputSchemaJson()) != "{}" || strings.Join(r.GetWarnings(), "") != "fell back" {
		t.Errorf("response %v", r)
	}
	fs.err = fmt.Errorf("search: the query is empty: %w", pluginapi.ErrInvalidArgument)
	if _, err := c.SearchTools(ctx, &cexecv1.SearchToolsRequest{}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "query is empty") {
		t.Errorf("empty query: %v", err)
	}
}

func TestToolsUnwired(t *testing.T) {
	c := serve(t, Deps{Plugins: fakePlugins{}, Config: fakeConfig{}})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"ListServers":  func() error { _, err := c.ListServers(ctx, &cexecv1.ListServersRequest{}); return err },
		"ListTools":    func() error { _, err := c.ListTools(ctx, &cexecv1.ListToolsRequest{}); return err },
		"GetTool":      func() error { _, err := c.GetTool(ctx, &cexecv1.GetToolRequest{Id: "a/b"}); return err },
		"RefreshTools": func() error { _, err := c.RefreshTools(ctx, &cexecv1.RefreshToolsRequest{}); return err },
		"SearchTools":  func() error { _, err := c.SearchTools(ctx, &cexecv1.SearchToolsRequest{Query: "x"}); return err },
	} {
		if err := call(); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v, want Unimplemented", name, err)
		}
	}
}
