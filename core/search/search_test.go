package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// fakeCatalog is an in-memory catalog whose changes the test emits.
type fakeCatalog struct {
	mu    sync.Mutex
	tools []catalog.Tool
	subs  []func(catalog.Change)
}

func tool(server, name, desc, schema string) catalog.Tool {
	t := catalog.Tool{
		ID: server + "/" + name, Server: server, Name: name, Description: desc, Hash: fmt.Sprintf("%s|%s|%s", name, desc, schema),
		Stub: catalog.StubInfo{Module: "servers." + server + "." + name, Function: name, Import: "from servers." + server + " import " + name},
	}
	if schema != "" {
		t.InputSchema = json.RawMessage(schema)
	}
	return t
}

func (c *fakeCatalog) Tools() []catalog.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tools)
}

func (c *fakeCatalog) Tool(server, name string) (catalog.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tools {
		if t.ID == server+"/"+name {
			return t, true
		}
	}
	return catalog.Tool{}, false
}

func (c *fakeCatalog) StubSource(id string) ([]byte, bool) {
	server, name, _ := strings.Cut(id, "/")
	if _, ok := c.Tool(server, name); !ok {
		return nil, false
	}
	return []byte("# stub of " + id + "\nfrom cexec import call_tool\n"), true
}

func (c *fakeCatalog) Servers() []catalog.ServerStatus {
	var out []catalog.ServerStatus
	for _, t := range c.Tools() {
		if !slices.ContainsFunc(out, func(s catalog.ServerStatus) bool { return s.Name == t.Server }) {
			out = append(out, catalog.ServerStatus{Name: t.Server})
		}
	}
	return out
}

func (c *fakeCatalog) Subscribe(fn func(catalog.Change)) func() {
	c.mu.Lock()
	c.subs = append(c.subs, fn)
	reset := catalog.Change{Reset: true, Upserts: slices.Clone(c.tools)}
	c.mu.Unlock()
	go fn(reset)
	return func() {}
}

// change installs tools and tells the subscribers what changed, as the
// catalog does (synchronously here, so the test knows it was applied).
func (c *fakeCatalog) change(up []catalog.Tool, del []string) {
	c.mu.Lock()
	for _, t := range up {
		if i := slices.IndexFunc(c.tools, func(x catalog.Tool) bool { return x.ID == t.ID }); i >= 0 {
			c.tools[i] = t
		} else {
			c.tools = append(c.tools, t)
		}
	}
	c.tools = slices.DeleteFunc(c.tools, func(t catalog.Tool) bool { return slices.Contains(del, t.ID) })
	subs := slices.Clone(c.subs)
	c.mu.Unlock()
	for _, fn := range subs {
		fn(catalog.Change{Upserts: up, Deletes: del})
	}
}

// fakeSkills serves a fixed list of shared skills.
type fakeSkills struct {
	mu     sync.Mutex
	skills []Skill
}

func (f *fakeSkills) ListSkills(context.Context) ([]Skill, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.skills), nil
}

func (f *fakeSkills) SkillCode(_ context.Context, name string) (string, error) {
	return "def run():\n    return " + fmt.Sprintf("%q", name) + "\n", nil
}

func (f *fakeSkills) set(s []Skill) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skills = s
}

// recorder is a keyword selector with its Index calls recorded, a switch
// that makes calls fail, and a way to lose the index as a restarted plugin
// does.
type recorder struct {
	mu    sync.Mutex
	eng   *keywordIndex
	calls []selector.IndexRequest
	fail  error
}

func newRecorder() *recorder { return &recorder{eng: newKeywordIndex()} }

func (r *recorder) Info(ctx context.Context) (pluginapi.Info, error) { return r.engine().Info(ctx) }
func (r *recorder) Configure(ctx context.Context, cfg json.RawMessage, v string) (pluginapi.Diagnostics, error) {
	return r.engine().Configure(ctx, cfg, v)
}

func (r *recorder) engine() *keywordIndex {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng
}

func (r *recorder) Index(ctx context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	r.mu.Lock()
	r.calls = append(r.calls, req)
	fail, eng := r.fail, r.eng
	r.mu.Unlock()
	if fail != nil {
		return selector.IndexResponse{}, fail
	}
	return eng.Index(ctx, req)
}

func (r *recorder) Search(ctx context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	r.mu.Lock()
	fail, eng := r.fail, r.eng
	r.mu.Unlock()
	if fail != nil {
		return selector.SearchResponse{}, fail
	}
	return eng.Search(ctx, req)
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

// restart replaces the index with an empty one, as a relaunched plugin's is.
func (r *recorder) restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eng = newKeywordIndex()
}

func (r *recorder) takeCalls() []selector.IndexRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

var refTools = []catalog.Tool{
	tool("filesystem", "read_text_file", "Read the complete contents of a file from the file system as text.",
		`{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"number"}},"required":["path"]}`),
	tool("filesystem", "list_directory", "Get a detailed listing of all files and directories in a specified path.",
		`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	tool("filesystem", "write_file", "Create a new file or completely overwrite an existing file with new content.",
		`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`),
	tool("memory", "create_entities", "Create multiple new entities in the knowledge graph",
		`{"type":"object","properties":{"entities":{"type":"array"}},"required":["entities"]}`),
	tool("memory", "read_graph", "Read the entire knowledge graph", `{"type":"object","properties":{}}`),
}

var refSkills = []Skill{
	{Name: "csv_report", Description: "Summarise a CSV file into a Markdown report with column statistics", Import: "skills.csv_report"},
	{Name: "text_diff", Description: "Show a unified diff between two texts", Import: "skills.text_diff"},
}

type fixture struct {
	cat    *fakeCatalog
	sel    *recorder
	skills *fakeSkills
	svc    *Service
}

func newFixture(t *testing.T, withSelector bool) *fixture {
	t.Helper()
	f := &fixture{cat: &fakeCatalog{tools: slices.Clone(refTools)}, skills: &fakeSkills{skills: slices.Clone(refSkills)}}
	o := Options{Catalog: f.cat, Skills: f.skills, SelectorName: "embeddings"}
	if withSelector {
		f.sel = newRecorder()
		o.Selector = f.sel
	}
	f.svc = New(o)
	f.svc.Start()
	t.Cleanup(f.svc.Close)
	if withSelector {
		f.waitGeneration(t, 1)
	} else {
		waitFor(t, func() bool { return len(f.svc.skillsByName()) == len(refSkills) })
	}
	return f
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) waitGeneration(t *testing.T, g uint64) {
	t.Helper()
	waitFor(t, func() bool { return f.svc.Generation() >= g && f.svc.Synced() })
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func TestSearchDetailLevels(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		detail     string
		wantDesc   bool
		wantSource bool
	}{
		{DetailName, false, false},
		{DetailDescription, true, false},
		{"", true, false},
		{DetailFull, true, true},
	} {
		t.Run("detail="+tc.detail, func(t *testing.T) {
			res, err := f.svc.Search(context.Background(), Request{Query: "read a file", Detail: tc.detail, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Warnings) > 0 {
				t.Errorf("warnings %v", res.Warnings)
			}
			if len(res.Hits) == 0 || res.Hits[0].ID != "filesystem/read_text_file" {
				t.Fatalf("hits %v, want filesystem/read_text_file first", ids(res.Hits))
			}
			h := res.Hits[0]
			if h.Kind != KindTool || h.Server != "filesystem" || h.Name != "read_text_file" || h.Import != "from servers.filesystem import read_text_file" || h.Score <= 0 {
				t.Errorf("hit %+v", h)
			}
			if (h.Description != "") != tc.wantDesc {
				t.Errorf("description %q, want set: %v", h.Description, tc.wantDesc)
			}
			if (h.StubSource != "") != tc.wantSource || (h.InputSchema != nil) != tc.wantSource {
				t.Errorf("stub %q schema %s, want set: %v", h.StubSource, h.InputSchema, tc.wantSource)
			}
			if tc.wantSource && !strings.Contains(string(h.InputSchema), `"path"`) {
				t.Errorf("schema %s", h.InputSchema)
			}
		})
	}
}

func TestSearchFilters(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  Request
		want func([]Hit) error
	}{
		{"server filter", Request{Query: "read", Servers: []string{"memory"}}, func(h []Hit) error {
			if len(h) == 0 || slices.ContainsFunc(h, func(x Hit) bool { return x.Server != "memory" }) {
				return fmt.Errorf("hits %v, want memory only", ids(h))
			}
			return nil
		}},
		{"skills are searchable", Request{Query: "csv report with statistics", Detail: DetailFull}, func(h []Hit) error {
			if len(h) == 0 || h[0].ID != "skills/csv_report" || h[0].Kind != KindSkill || h[0].Import != "import skills.csv_report" ||
				!strings.Contains(h[0].StubSource, "def run") {
				return fmt.Errorf("hits %+v, want skills/csv_report first with its code", h)
			}
			return nil
		}},
		{"kinds filter", Request{Query: "csv report file", Kinds: []string{KindTool}}, func(h []Hit) error {
			if slices.ContainsFunc(h, func(x Hit) bool { return x.Kind != KindTool }) {
				return fmt.Errorf("hits %v, want tools only", ids(h))
			}
			return nil
		}},
		{"limit", Request{Query: "file graph entities directory", Limit: 2}, func(h []Hit) error {
			if len(h) != 2 {
				return fmt.Errorf("%d hits, want 2", len(h))
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := f.svc.Search(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.want(res.Hits); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSearchInvalid(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		req     Request
		want    error
		message string
	}{
		{Request{Query: "  "}, pluginapi.ErrInvalidArgument, "query is empty"},
		{Request{Query: "x", Detail: "all"}, pluginapi.ErrInvalidArgument, `not "all"`},
		{Request{Query: "x", Limit: MaxLimit + 1}, pluginapi.ErrInvalidArgument, "between 1 and 50"},
		{Request{Query: "x", Limit: -1}, pluginapi.ErrInvalidArgument, "between 1 and 50"},
		{Request{Query: "x", Kinds: []string{"prompt"}}, pluginapi.ErrInvalidArgument, "kind must be"},
		{Request{Query: "x", Servers: []string{"github"}}, pluginapi.ErrNotFound, `unknown server "github" (servers: filesystem, memory, skills)`},
	} {
		_, err := f.svc.Search(context.Background(), tc.req)
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.message) {
			t.Errorf("%+v: error %v, want %v containing %q", tc.req, err, tc.want, tc.message)
		}
	}
}

func TestIndexFollowsCatalog(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	first := f.sel.takeCalls()
	if len(first) != 1 || !first[0].Reset || len(first[0].Upserts) != len(refTools)+len(refSkills) {
		t.Fatalf("initial index calls %+v, want one reset with every tool and skill", first)
	}

	// An upsert of a new tool and a delete, by id, incrementally.
	grep := tool("filesystem", "search_files", "Recursively search for files and directories matching a glob pattern.", `{"type":"object","properties":{"pattern":{"type":"string"}}}`)
	f.cat.change([]catalog.Tool{grep}, []string{"memory/read_graph"})
	calls := f.sel.takeCalls()
	if len(calls) != 1 || calls[0].Reset || len(calls[0].Upserts) != 1 || calls[0].Upserts[0].ContentHash != grep.Hash ||
		!slices.Equal(calls[0].Deletes, []string{"memory/read_graph"}) {
		t.Fatalf("index calls %+v, want one upsert and one delete", calls)
	}
	res, err := f.svc.Search(ctx, Request{Query: "glob pattern", Limit: 1})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != "filesystem/search_files" {
		t.Fatalf("search after upsert: %v %v", ids(res.Hits), err)
	}
	res, err = f.svc.Search(ctx, Request{Query: "entire knowledge graph", Servers: []string{"memory"}})
	if err != nil || slices.Contains(ids(res.Hits), "memory/read_graph") {
		t.Fatalf("deleted tool still found: %v %v", ids(res.Hits), err)
	}

	// A large change goes out in batches of at most BatchSize documents.
	var many []catalog.Tool
	for i := range 2500 {
		many = append(many, tool("bulk", fmt.Sprintf("op_%d", i), fmt.Sprintf("bulk operation number %d", i), ""))
	}
	f.cat.change(many, nil)
	calls = f.sel.takeCalls()
	total := 0
	for _, c := range calls {
		if n := len(c.Upserts) + len(c.Deletes); n > BatchSize || c.Reset {
			t.Errorf("batch of %d documents (reset %v)", n, c.Reset)
		}
		total += len(c.Upserts)
	}
	if len(calls) != 3 || total != 2500 {
		t.Errorf("%d calls with %d upserts, want 3 with 2500", len(calls), total)
	}
}

func TestReindexAfterRestart(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	f.sel.restart()
	res, err := f.svc.Search(ctx, Request{Query: "read a file"})
	if err != nil || len(res.Hits) != 0 {
		t.Fatalf("a restarted selector should have lost its index: %v %v", ids(res.Hits), err)
	}
	f.svc.Reindex()
	f.waitGeneration(t, 2)
	res, err = f.svc.Search(ctx, Request{Query: "read a file", Limit: 1})
	if err != nil || len(res.Warnings) != 0 || len(res.Hits) != 1 || res.Hits[0].ID != "filesystem/read_text_file" {
		t.Fatalf("after reindex: %v %v %v", ids(res.Hits), res.Warnings, err)
	}
}

func TestFailingSelector(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	f.sel.setFail(fmt.Errorf("plugin selector.embeddings exited during the call: %w", pluginapi.ErrPluginShutdown))

	// Search falls back, with a warning naming the cause.
	res, err := f.svc.Search(ctx, Request{Query: "read a file", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || res.Hits[0].ID != "filesystem/read_text_file" {
		t.Errorf("fallback hits %v", ids(res.Hits))
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "selector embeddings failed") || !strings.Contains(res.Warnings[0], "substring") {
		t.Errorf("warnings %v", res.Warnings)
	}

	// A failed index update leaves the index out of date: searches fall
	// back, and the next change re-indexes everything.
	f.cat.change([]catalog.Tool{tool("memory", "delete_entities", "Delete multiple entities from the knowledge graph", "")}, nil)
	if f.svc.Synced() {
		t.Fatal("synced after a failed index call")
	}
	f.sel.setFail(nil)
	f.sel.takeCalls()
	res, _ = f.svc.Search(ctx, Request{Query: "read a file"})
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "out of date") {
		t.Errorf("warnings while out of date: %v", res.Warnings)
	}
	f.cat.change([]catalog.Tool{tool("memory", "add_observations", "Add new observations to existing entities", "")}, nil)
	calls := f.sel.takeCalls()
	if len(calls) != 1 || !calls[0].Reset || len(calls[0].Upserts) != len(refTools)+2+len(refSkills) {
		t.Fatalf("calls after recovery %+v, want one full reset", calls)
	}
	if !f.svc.Synced() {
		t.Fatal("not synced after a full re-index")
	}
}

func TestRefreshSkills(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	f.sel.takeCalls()
	f.skills.set([]Skill{refSkills[0], {Name: "json_query", Description: "Query JSON documents with a path expression", Import: "skills.json_query"}})
	if err := f.svc.RefreshSkills(ctx); err != nil {
		t.Fatal(err)
	}
	calls := f.sel.takeCalls()
	if len(calls) != 1 || len(calls[0].Upserts) != 1 || calls[0].Upserts[0].ID != "skills/json_query" || !slices.Equal(calls[0].Deletes, []string{"skills/text_diff"}) {
		t.Fatalf("calls %+v, want json_query upserted and text_diff deleted", calls)
	}
	res, err := f.svc.Search(ctx, Request{Query: "json path query", Limit: 1})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != "skills/json_query" {
		t.Fatalf("hits %v %v", ids(res.Hits), err)
	}
	// Nothing changed: nothing is sent.
	if err := f.svc.RefreshSkills(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := f.sel.takeCalls(); len(calls) != 0 {
		t.Errorf("calls %+v for unchanged skills", calls)
	}
}

func TestNoSelector(t *testing.T) {
	f := newFixture(t, false)
	for _, tc := range []struct {
		req  Request
		want []string
	}{
		{Request{Query: "read a file", Limit: 3}, []string{"filesystem/read_text_file", "filesystem/write_file", "memory/read_graph"}},
		{Request{Query: "knowledge graph", Servers: []string{"memory"}}, []string{"memory/read_graph", "memory/create_entities"}},
		{Request{Query: "CSV", Detail: DetailName}, []string{"skills/csv_report"}},
		{Request{Query: "the of a"}, []string{}},
	} {
		res, err := f.svc.Search(context.Background(), tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Hits); !slices.Equal(got, tc.want) {
			t.Errorf("%q: hits %v, want %v", tc.req.Query, got, tc.want)
		}
		if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "no selector plugin is configured") {
			t.Errorf("warnings %v", res.Warnings)
		}
	}
}

func TestReindexAfterClose(t *testing.T) {
	f := newFixture(t, true)
	f.sel.takeCalls()
	f.svc.Close()
	f.svc.Reindex()
	f.svc.Close() // waits for background work, were there any
	if calls := f.sel.takeCalls(); len(calls) != 0 {
		t.Errorf("index calls after Close: %+v", calls)
	}
}
