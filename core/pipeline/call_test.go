package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/catalog"
	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/workspace"
)

// echoCatalog is the bridge's catalog with one server whose tools answer
// with the arguments they got, so a test sees what went upstream.
type echoCatalog struct {
	mu      sync.Mutex
	sent    []string
	tenants []string
}

var lookupSchema = json.RawMessage(`{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}`)

func (c *echoCatalog) Tool(server, name string) (catalog.Tool, bool) {
	if server != "crm" || (name != "lookup" && name != "delete_contact") {
		return catalog.Tool{}, false
	}
	return catalog.Tool{ID: server + "/" + name, Server: server, Name: name, InputSchema: lookupSchema}, true
}

func (c *echoCatalog) Tools() []catalog.Tool {
	a, _ := c.Tool("crm", "lookup")
	b, _ := c.Tool("crm", "delete_contact")
	return []catalog.Tool{a, b}
}

func (c *echoCatalog) Server(name string) (catalog.ServerStatus, bool) {
	return catalog.ServerStatus{Name: name, State: catalog.StateReady}, name == "crm"
}

func (c *echoCatalog) Call(_ context.Context, tenant, _, _ string, args json.RawMessage) (*mcp.CallToolResult, error) {
	c.mu.Lock()
	c.sent = append(c.sent, string(args))
	c.tenants = append(c.tenants, tenant)
	c.mu.Unlock()
	var a struct{ Who string }
	_ = json.Unmarshal(args, &a)
	return mcp.NewToolResultText("contact: " + a.Who + " <ada@example.com>"), nil
}

// TestCallTool makes the face's single calls through a real bridge and a
// real guard layer: arguments are validated with a sentence, the policy
// refuses denied tools, tokens in arguments are restored upstream and the
// result comes back tokenized.
func TestCallTool(t *testing.T) {
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}},
		Policies: map[string]*policy.Policy{"acme": {Deny: []string{"crm/delete_*"}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	cat := &echoCatalog{}
	x := &Executor{Workspaces: ws, Tools: bridge.New(cat, nil, bridge.Limits{}), Guard: gr}
	call := func(tool, args string) *CodeResult {
		t.Helper()
		res, err := x.CallTool(context.Background(), ToolCallRequest{Tenant: "acme", Session: "s1", Server: "crm", Tool: tool,
			Arguments: json.RawMessage(args), ModelFacing: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := call("lookup", `{"who":"Ada"}`)
	var got string
	if err := json.Unmarshal(res.Result, &got); err != nil || got != "contact: Ada <[EMAIL_1]>" || res.Error != nil || !res.Tokenized {
		t.Errorf("result %s, error %+v, tokenized %v", res.Result, res.Error, res.Tokenized)
	}
	if res.Summary.Calls != 1 || res.Session != "s1" {
		t.Errorf("summary %+v, session %q", res.Summary, res.Session)
	}
	// The model writes the token back; the upstream gets the address.
	call("lookup", `{"who":"[EMAIL_1]"}`)
	// A tenant-scoped server's call goes to the calling tenant's instance.
	if got := cat.tenants[len(cat.tenants)-1]; got != "acme" {
		t.Errorf("the call reached tenant %q's upstream, want acme's", got)
	}
	if got := cat.sent[len(cat.sent)-1]; got != `{"who":"ada@example.com"}` {
		t.Errorf("sent upstream %s", got)
	}

	for _, tt := range []struct {
		name, tool, args, typ, msg string
	}{
		{"missing argument", "lookup", `{}`, bridge.TypeInvalidArguments, `invalid arguments for crm/lookup: missing required argument "who"`},
		{"wrong type", "lookup", `{"who":3}`, bridge.TypeInvalidArguments, `argument "who": expected string, got number`},
		{"denied", "delete_contact", `{"who":"Ada"}`, TypeDenied, "crm/delete_contact"},
		{"unknown", "lookups", `{}`, bridge.TypeToolNotFound, "lookup"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := len(cat.sent)
			res := call(tt.tool, tt.args)
			if res.Error == nil || res.Error.Type != tt.typ || !strings.Contains(res.Error.Message, tt.msg) || res.Result != nil {
				t.Errorf("error %+v, result %s; want %s containing %q", res.Error, res.Result, tt.typ, tt.msg)
			}
			if len(cat.sent) != n {
				t.Errorf("the upstream was called")
			}
		})
	}

	// Every call is in the session's log.
	ten, err := ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	log, err := ten.ReadSession("s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 6 || log.Entries[0].Code != `call_tool("crm", "lookup", {"who":"Ada"})` {
		t.Errorf("%d log entries: %+v", len(log.Entries), log.Entries)
	}
}

// noisyCatalog's upstream reports progress and logs during a call, both
// with an e-mail address, and answers once the progress got through.
type noisyCatalog struct {
	echoCatalog
	reported chan struct{}
}

func (c *noisyCatalog) Call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if n := catalog.CallNoticesFrom(ctx); n != nil {
		n.Log(catalog.LogMessage{Server: server, Level: "info", Data: json.RawMessage(`"looked up bob@example.org"`)})
		if n.Progress != nil {
			n.Progress(server, tool, 1, 2, "half of bob@example.org")
			<-c.reported
		}
	}
	return c.echoCatalog.Call(ctx, tenant, server, tool, args)
}

// TestCallToolNotices: an upstream's progress reaches the caller and its log
// message the session log, both tokenized for a model-facing call.
func TestCallToolNotices(t *testing.T) {
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	cat := &noisyCatalog{reported: make(chan struct{})}
	x := &Executor{Workspaces: ws, Tools: bridge.New(cat, nil, bridge.Limits{}), Guard: gr, Log: hclog.NewNullLogger()}
	var got []Progress
	res, err := x.CallTool(context.Background(), ToolCallRequest{Tenant: "acme", Session: "s1", Server: "crm", Tool: "lookup",
		Arguments: json.RawMessage(`{"who":"ada"}`), ModelFacing: true, Progress: func(p Progress) {
			got = append(got, p)
			close(cat.reported)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Message != "crm/lookup 1/2: half of [EMAIL_1]" {
		t.Errorf("progress %+v, want one tokenized report", got)
	}
	if len(res.UpstreamLog) != 1 || string(res.UpstreamLog[0].Data) != `"looked up [EMAIL_1]"` {
		t.Errorf("upstream log %+v, want the message tokenized", res.UpstreamLog)
	}
	tn, err := ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	log, err := tn.ReadSession("s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 1 || len(log.Entries[0].UpstreamLog) != 1 || log.Entries[0].UpstreamLog[0].Server != "crm" ||
		strings.Contains(string(log.Entries[0].UpstreamLog[0].Data), "bob@") {
		t.Errorf("session log %+v, want the call with its tokenized upstream log", log.Entries)
	}
}
