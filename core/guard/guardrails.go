package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

// Options configure Guardrails.
type Options struct {
	// Guards are the guard plugins of pipeline.guards, in order.
	Guards []Named
	// Policies are the tenants' decoded policies (policy.DecodeTenants).
	// A tenant without one gets an empty policy: everything allowed,
	// not strict, PII failing closed.
	Policies map[string]*policy.Policy
	// Vaults keeps the sessions' tokens.
	Vaults *vault.Store
	// Logger receives denials (rule, tool; never values) and guard
	// failures.
	Logger hclog.Logger
}

// Guardrails is the host's guard layer: per tenant policy, guard plugins,
// and the per-session vault. It is safe for concurrent use.
type Guardrails struct {
	guards *Guards
	// policies is replaced whole by SetPolicies (a config reload).
	policies atomic.Pointer[map[string]*policy.Policy]
	vaults   *vault.Store
	log      hclog.Logger
}

// New returns Guardrails for opts.
func New(opts Options) (*Guardrails, error) {
	if opts.Vaults == nil {
		return nil, errors.New("guard: Options.Vaults is nil")
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("guard")
	for tenant, p := range opts.Policies {
		if p != nil && p.PIIFailOpen && !p.Strict && len(opts.Guards) > 0 {
			log.Warn("pii_fail_open: while a guard cannot detect, this tenant's model-facing output goes out untokenized", "tenant", tenant)
		}
	}
	g := &Guardrails{guards: NewGuards(opts.Guards, log), vaults: opts.Vaults, log: log}
	g.SetPolicies(opts.Policies)
	return g, nil
}

// SetPolicies replaces the tenants' policies (a config reload). Sessions
// opened before keep the policy they started with.
func (g *Guardrails) SetPolicies(p map[string]*policy.Policy) {
	g.policies.Store(&p)
}

// Policy returns a tenant's policy (never nil). Use it to hide tools the
// tenant may not call: policy.CheckTool(server, tool) != nil.
func (g *Guardrails) Policy(tenant string) *policy.Policy {
	if p := (*g.policies.Load())[tenant]; p != nil {
		return p
	}
	return &policy.Policy{}
}

// Open opens a tenant's session: its vault, its policy and the guards in
// the tenant's strictness. Close it when the request is done; sessions
// opened concurrently share the vault.
func (g *Guardrails) Open(tenant, session string) (*Session, error) {
	p := g.Policy(tenant)
	guards := g.guards.WithStrict(p.Strict).WithDetectOpen(p.PIIFailOpen)
	v, err := g.vaults.Open(tenant, session, guards)
	if err != nil {
		return nil, err
	}
	return &Session{tenant: tenant, session: session, policy: p, guards: guards, vault: v,
		log: g.log.With("tenant", tenant, "session", session)}, nil
}

// Session is one tenant session's view of the guard layer.
type Session struct {
	tenant, session string
	policy          *policy.Policy
	guards          *Guards
	vault           *vault.Vault
	log             hclog.Logger
}

// Close releases the session's vault.
func (s *Session) Close() error { return s.vault.Close() }

// Policy returns the tenant's policy.
func (s *Session) Policy() *policy.Policy { return s.policy }

// Vault returns the session's vault, for callers that need it directly.
func (s *Session) Vault() *vault.Vault { return s.vault }

// Tokenize tokenizes model-facing text outside an execution (MCP face
// results, error messages). An error means the text must not be sent.
func (s *Session) Tokenize(ctx context.Context, text string) (string, error) {
	return s.vault.Tokenize(ctx, text)
}

// TokenizeJSON tokenizes a model-facing JSON value, such as an upstream
// tool result relayed through the MCP face.
func (s *Session) TokenizeJSON(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	return s.vault.TokenizeJSON(ctx, raw)
}

// TokenizeTextJSON tokenizes a reply's text and JSON value together, with
// one detection.
func (s *Session) TokenizeTextJSON(ctx context.Context, text string, raw json.RawMessage) (string, json.RawMessage, error) {
	return s.vault.TokenizeTextJSON(ctx, text, raw)
}

// TokenizeTexts tokenizes several model-facing texts and a JSON value
// (which may be empty) with one detection.
func (s *Session) TokenizeTexts(ctx context.Context, texts []string, raw json.RawMessage) ([]string, json.RawMessage, error) {
	return s.vault.TokenizeTexts(ctx, texts, raw)
}

// Untokenize restores the session's tokens in text from the model.
func (s *Session) Untokenize(text string) (string, error) {
	return s.vault.Untokenize(text)
}

// UntokenizeJSON restores the session's tokens in a JSON value from the
// model.
func (s *Session) UntokenizeJSON(raw json.RawMessage) (json.RawMessage, error) {
	return s.vault.UntokenizeJSON(raw)
}

// PrepareCode turns the agent's code into the code to run: tokens inside
// string literals are restored (so "write to [EMAIL_1]" writes to the
// real address), then the real code is checked against the policy's
// deny_code and by every guard's CheckCode. Checking the real code means
// a token cannot smuggle a denied string past the checks. The error is a
// *policy.Violation or a *Denial (both wrap pluginapi.ErrDenied) and is
// safe to show the agent after Tokenize.
func (s *Session) PrepareCode(ctx context.Context, code string) (string, error) {
	real, err := s.vault.UntokenizePython(code)
	if err != nil {
		return "", err
	}
	if err := s.policy.CheckCode(real); err != nil {
		s.denied("code denied", err)
		return "", err
	}
	if err := s.guards.CheckCode(ctx, guardapi.CheckCodeRequest{Tenant: s.tenant, Session: s.session, Code: real}); err != nil {
		s.denied("code denied", err)
		return "", err
	}
	return real, nil
}

func (s *Session) denied(msg string, err error) {
	var v *policy.Violation
	var d *Denial
	switch {
	case errors.As(err, &v):
		s.log.Info(msg, "rule", v.Rule, "server", v.Server, "tool", v.Tool, "argument", v.Argument)
	case errors.As(err, &d):
		s.log.Info(msg, "guard", d.Guard, "hook", d.Hook)
	}
}

// Begin starts an execution: tool calls are counted against
// max_tool_calls and output against max_output from here.
func (s *Session) Begin() *Execution {
	return &Execution{s: s, calls: s.policy.NewCounter()}
}

// Execution is one run of agent code in a session.
type Execution struct {
	s     *Session
	calls *policy.Counter
	out   atomic.Int64 // bytes returned to the model so far
}

// Calls returns the number of tool calls made so far.
func (x *Execution) Calls() int { return x.calls.Count() }

// ToolCall vets a call_tool from the sandboxed code and returns the
// arguments to send upstream: the call is counted (max_tool_calls), the
// tool checked against allow and deny, tokens in the arguments restored,
// the real arguments checked against the constraints and by every guard.
// Upstream results go back to the sandbox as they are (data flows between
// tools in the clear inside the sandbox); only what the execution returns
// is tokenized, by Output and OutputJSON.
func (x *Execution) ToolCall(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	s := x.s
	if err := x.calls.Add(); err != nil {
		s.denied("tool call denied", err)
		return nil, err
	}
	if err := s.policy.CheckTool(server, tool); err != nil {
		s.denied("tool call denied", err)
		return nil, err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	real, err := s.vault.UntokenizeJSON(args)
	if err != nil {
		return nil, fmt.Errorf("tool %s/%s: arguments: %w", server, tool, err)
	}
	if err := s.policy.CheckArguments(server, tool, real); err != nil {
		s.denied("tool call denied", err)
		return nil, err
	}
	req := guardapi.CheckToolCallRequest{Tenant: s.tenant, Session: s.session, Server: server, Tool: tool, Arguments: real}
	if err := s.guards.CheckToolCall(ctx, req); err != nil {
		s.denied("tool call denied", err)
		return nil, err
	}
	return real, nil
}

// Charge enforces max_output on text already tokenized: the budget is
// shared by everything one execution returns and counted after
// tokenization. Text past the budget is cut, on a character boundary and
// never inside a token, and a note says how much was left out.
func (x *Execution) Charge(tok string) string {
	if tok == "" {
		return ""
	}
	limit := x.s.policy.MaxOutput
	used := x.out.Add(int64(len(tok)))
	if limit == 0 || used <= limit {
		return tok
	}
	room := limit - (used - int64(len(tok))) // what this call may still use
	note := fmt.Sprintf("\n(output truncated: %d more bytes exceed max_output %s)", used-limit, policy.FormatSize(limit))
	keep := max(room-int64(len(note)), 0)
	x.s.log.Info("output truncated", "rule", "max_output", "bytes", len(tok), "kept", keep)
	return truncate(tok, int(keep)) + note
}

// ChargeJSON charges a tokenized JSON value to the max_output budget. JSON
// cannot be cut, so a value past the budget is an error (a
// *policy.Violation), and its bytes are given back: what is not sent
// leaves room for the rest.
func (x *Execution) ChargeJSON(tok json.RawMessage) (json.RawMessage, error) {
	used := x.out.Add(int64(len(tok)))
	if err := x.s.policy.CheckOutput(int(used)); err != nil {
		x.out.Add(-int64(len(tok)))
		x.s.denied("output denied", err)
		return nil, err
	}
	return tok, nil
}

// truncate cuts s to at most n bytes, backing off to a character boundary
// and to before a token the cut would split.
func truncate(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	s = s[:n]
	// A '[' near the end with no ']' after it may begin a token.
	if i := strings.LastIndexByte(s, '['); i >= 0 && len(s)-i < 64 && !strings.Contains(s[i:], "]") {
		s = s[:i]
	}
	return s
}
