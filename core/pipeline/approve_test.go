package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/catalog"
	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/workspace"
)

// formAsker answers approval forms as told, and records the questions.
type formAsker struct {
	answer func() (*mcp.ElicitationResult, error)

	mu    sync.Mutex
	asked []mcp.ElicitationParams
}

func (a *formAsker) Elicit(_ context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, p)
	a.mu.Unlock()
	return a.answer()
}

// silentUser never answers: Elicit waits for ctx.
type silentUser struct{}

func (silentUser) Elicit(ctx context.Context, _ mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func accept(content map[string]any) func() (*mcp.ElicitationResult, error) {
	return func() (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
	}
}

// TestApprovals runs calls that the tenant's policy wants approved through
// a real bridge and guard layer: the user approves or denies through the
// form (which shows the arguments with PII as tokens), an operator decides
// through the queue when the user cannot be asked, and no answer, a
// decline, or nobody to ask refuse the call without reaching the upstream.
func TestApprovals(t *testing.T) {
	ws, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pol := &policy.Policy{Approvals: []*policy.Approval{{Tools: []string{"crm/delete_*"}, Timeout: time.Minute}}}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}},
		Policies: map[string]*policy.Policy{"acme": pol}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	cat := &echoCatalog{}
	queue := NewApprovals()
	x := &Executor{Workspaces: ws, Tools: bridge.New(cat, nil, bridge.Limits{}), Guard: gr, Approvals: queue, Log: hclog.NewNullLogger()}
	// operator decides the next call that waits in the queue.
	operator := func(approve bool) {
		for {
			if p, _ := queue.List(context.Background()); len(p) == 1 {
				if p[0].Server != "crm" || p[0].Tool != "delete_contact" || strings.Contains(string(p[0].Arguments), "ada@") ||
					!strings.Contains(string(p[0].Arguments), "[EMAIL_") {
					t.Errorf("pending %+v: want crm/delete_contact with the address as a token", p[0])
				}
				if err := queue.Decide(context.Background(), p[0].ID, approve); err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
	}

	// A tool no rule covers is not held.
	user := &formAsker{answer: accept(map[string]any{approveField: true})}
	if res := callTool(t, x, user, "lookup"); res.Error != nil || len(user.asked) != 0 {
		t.Fatalf("lookup: %+v, asked %d", res.Error, len(user.asked))
	}

	for _, tc := range []struct {
		name    string
		asker   *formAsker
		silent  bool
		decide  func()
		timeout time.Duration
		// ok: the call reached the upstream; else want is in the error.
		ok           bool
		want, record string
	}{
		{name: "user approves", asker: user, ok: true, record: "approved by the user"},
		{name: "user refuses in the form", asker: &formAsker{answer: accept(map[string]any{approveField: false})}, want: "denied by the user", record: "denied by the user"},
		{name: "user accepts without the field", asker: &formAsker{answer: accept(nil)}, want: "denied by the user"},
		{name: "user declines", asker: &formAsker{answer: func() (*mcp.ElicitationResult, error) {
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
		}}, want: "denied by the user, who declined the form"},
		{name: "user cancels", asker: &formAsker{answer: func() (*mcp.ElicitationResult, error) {
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}, nil
		}}, want: "denied by the user, who cancelled the form"},
		{name: "an answer without the approve field denies", asker: &formAsker{answer: accept(map[string]any{"approved": true})}, want: "denied by the user"},
		{name: "client cannot elicit: operator approves", asker: &formAsker{answer: func() (*mcp.ElicitationResult, error) {
			return nil, fmt.Errorf("%w: no capability", ErrCannotAsk)
		}}, decide: func() { operator(true) }, ok: true, record: "approved by an operator"},
		{name: "no asker: operator denies", decide: func() { operator(false) }, want: "denied by an operator", record: "denied by an operator"},
		{name: "user does not answer", silent: true, timeout: 20 * time.Millisecond, want: "no approval from the user within 20ms", record: "no approval from the user within 20ms"},
		{name: "no asker: nobody answers", timeout: 20 * time.Millisecond, want: "no approval from an operator within 20ms", record: "no approval from an operator within 20ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.timeout > 0 {
				pol.Approvals[0].Timeout = tc.timeout
				defer func() { pol.Approvals[0].Timeout = time.Minute }()
			}
			if tc.decide != nil {
				go tc.decide()
			}
			n := len(cat.sent)
			var asker Asker
			if tc.asker != nil {
				asker = tc.asker
			}
			if tc.silent {
				asker = silentUser{}
			}
			res := callTool(t, x, asker, "delete_contact")
			if tc.ok != (res.Error == nil) || tc.ok != (len(cat.sent) == n+1) {
				t.Fatalf("error %+v, upstream calls %d; want ok=%v", res.Error, len(cat.sent)-n, tc.ok)
			}
			if !tc.ok && (res.Error.Type != TypeDenied || !strings.Contains(res.Error.Message, tc.want)) {
				t.Errorf("error %+v, want %s containing %q", res.Error, TypeDenied, tc.want)
			}
			if tc.record != "" && (len(res.ToolCalls) != 1 || !strings.HasPrefix(res.ToolCalls[0].Approval, tc.record)) {
				t.Errorf("call records %+v, want approval %q", res.ToolCalls, tc.record)
			}
			if tc.asker != nil && len(tc.asker.asked) > 0 {
				q := tc.asker.asked[len(tc.asker.asked)-1]
				if !strings.Contains(q.Message, "delete_contact") || !strings.Contains(q.Message, "crm") ||
					!strings.Contains(q.Message, "[EMAIL_") || strings.Contains(q.Message, "ada@") {
					t.Errorf("question %q: want server, tool and the arguments with PII as tokens", q.Message)
				}
			}
		})
	}
	if err := queue.Decide(context.Background(), "nope", true); !errors.Is(err, ErrNoSuchApproval) {
		t.Errorf("Decide(unknown) = %v", err)
	}
	if p, _ := queue.List(context.Background()); len(p) != 0 {
		t.Errorf("left pending: %+v", p)
	}
}

// callTool makes acme's call of crm's tool with an e-mail address in its
// arguments.
func callTool(t *testing.T, x *Executor, asker Asker, tool string) *CodeResult {
	t.Helper()
	res, err := x.CallTool(context.Background(), ToolCallRequest{Tenant: "acme", Session: "s1", Server: "crm", Tool: tool,
		Arguments: json.RawMessage(`{"who":"ada@example.com"}`), ModelFacing: true, Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestApprovalOfReadResource: a program's read_resource has no catalog tool
// and changes nothing, so an annotation rule does not hold it, while a
// pattern naming <server>/read_resource does; an upstream tool that happens
// to be called read_resource is judged by its own annotations.
func TestApprovalOfReadResource(t *testing.T) {
	args := json.RawMessage(`{"uri":"file:///x"}`)
	for _, tc := range []struct {
		name  string
		rule  *policy.Approval
		tool  *bridge.Called // nil: a program's read_resource
		asked bool
	}{
		{"annotation rule, resource read", &policy.Approval{Annotations: []string{"destructiveHint"}, Timeout: time.Minute}, nil, false},
		{"pattern rule, resource read", &policy.Approval{Tools: []string{"crm/read_resource"}, Timeout: time.Minute}, nil, true},
		{"annotation rule, a tool named read_resource without annotations", &policy.Approval{Annotations: []string{"destructiveHint"}, Timeout: time.Minute},
			&bridge.Called{Tool: catalog.Tool{Server: "crm", Name: "read_resource"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs, _ := openGuard(t, &policy.Policy{Approvals: []*policy.Approval{tc.rule}}, false)
			user := &formAsker{answer: accept(map[string]any{approveField: true})}
			x := &Executor{Log: hclog.NewNullLogger()}
			ctx := context.Background()
			if tc.tool != nil {
				ctx = bridge.WithCalled(ctx, tc.tool)
			}
			if err := x.approve(ctx, gs, &CodeRequest{Tenant: "acme", Session: "s1", Asker: user}, "crm", bridge.MethodReadResource, args); err != nil {
				t.Fatal(err)
			}
			if asked := len(user.asked) > 0; asked != tc.asked {
				t.Errorf("asked %v, want %v", asked, tc.asked)
			}
		})
	}
}

// TestApprovalOfGetPrompt: a workflow's prompts/get counts as read-only,
// so only a pattern naming <server>/get_prompt holds it.
func TestApprovalOfGetPrompt(t *testing.T) {
	args := json.RawMessage(`{"name":"p"}`)
	for _, tc := range []struct {
		name  string
		rule  *policy.Approval
		asked bool
	}{
		{"annotation rule", &policy.Approval{Annotations: []string{"destructiveHint"}, Timeout: time.Minute}, false},
		{"pattern rule", &policy.Approval{Tools: []string{"crm/get_prompt"}, Timeout: time.Minute}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs, _ := openGuard(t, &policy.Policy{Approvals: []*policy.Approval{tc.rule}}, false)
			user := &formAsker{answer: accept(map[string]any{approveField: true})}
			x := &Executor{Log: hclog.NewNullLogger()}
			if err := x.approve(context.Background(), gs, &CodeRequest{Tenant: "acme", Session: "s1", Asker: user}, "crm", bridge.MethodGetPrompt, args); err != nil {
				t.Fatal(err)
			}
			if asked := len(user.asked) > 0; asked != tc.asked {
				t.Errorf("asked %v, want %v", asked, tc.asked)
			}
		})
	}
}
