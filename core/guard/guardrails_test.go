package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/pluginapi"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

const acmePolicy = `
strict         = true
max_tool_calls = 4
max_output     = "200B"
deny           = ["memory/delete_*"]
deny_code      = ["169\\.254\\.169\\.254"]
constraint "filesystem/write_file" {
  argument = "path"
  prefix   = "/data/out/"
}
`

func decodePolicy(t *testing.T, src string) *policy.Policy {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "cexec.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, diags := policy.Decode(f.Body)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return p
}

// harness is Guardrails over the real detectors served as a guard plugin
// over gRPC, plus a second guard that records tool calls.
type harness struct {
	gr     *guard.Guardrails
	pii    *fakeGuard
	policy *fakeGuard
	logs   *logBuffer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{pii: piiGuard(t), logs: &logBuffer{}}
	h.policy = &fakeGuard{
		code: func(req guardapi.CheckCodeRequest) (guardapi.Decision, error) {
			if strings.Contains(req.Code, "ptrace") {
				return deny("ptrace", "tracing other processes is not allowed"), nil
			}
			return guardapi.Decision{Allow: true}, nil
		},
		call: func(req guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
			return guardapi.Decision{Allow: req.Tool != "forbidden"}, nil
		},
	}
	pii, _ := serve(t, h.pii)
	pol, _ := serve(t, h.policy)
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir(), Logger: h.logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	h.gr, err = guard.New(guard.Options{
		Guards:   []guard.Named{{Name: "pii", Plugin: pii}, {Name: "policy", Plugin: pol}},
		Policies: map[string]*policy.Policy{"acme": decodePolicy(t, acmePolicy)},
		Vaults:   store,
		Logger:   h.logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) open(t *testing.T, tenant, session string) *guard.Session {
	t.Helper()
	s, err := h.gr.Open(tenant, session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRoundTrip follows issue 9's scenario at the library level: a tool
// result with PII reaches the model as tokens; the agent's next program
// uses the tokens; the sandbox's tool call carries the real values.
func TestRoundTrip(t *testing.T) {
	h := newHarness(t)
	s := h.open(t, "acme", "s1")
	ctx := t.Context()

	// Execution 1: the program read a file and returns what it found.
	x := s.Begin()
	stdout, err := output(ctx, s, x, "owner: alice@example.com, phone (212) 555-0100\n")
	if err != nil || stdout != "owner: [EMAIL_1], phone [PHONE_1]\n" {
		t.Fatalf("Output = %q, %v", stdout, err)
	}
	result, err := outputJSON(ctx, s, x, json.RawMessage(`{"rows":[{"email":"alice@example.com","ssn":"123-45-6789"}]}`))
	if err != nil || string(result) != `{"rows":[{"email":"[EMAIL_1]","ssn":"[US_SSN_1]"}]}` {
		t.Fatalf("OutputJSON = %s, %v", result, err)
	}

	// Execution 2: the agent passes the tokens on.
	code, err := s.PrepareCode(ctx, `write_file(path="/data/out/contacts.txt", content="[EMAIL_1] [US_SSN_1]")`)
	if err != nil || code != `write_file(path="/data/out/contacts.txt", content="alice@example.com 123-45-6789")` {
		t.Fatalf("PrepareCode = %q, %v", code, err)
	}
	x = s.Begin()
	args, err := x.ToolCall(ctx, "filesystem", "write_file", json.RawMessage(`{"path":"/data/out/[EMAIL_1].txt","content":"ssn [US_SSN_1]"}`))
	if err != nil || string(args) != `{"path":"/data/out/alice@example.com.txt","content":"ssn 123-45-6789"}` {
		t.Fatalf("ToolCall = %s, %v", args, err)
	}
	if got := h.policy.calls[len(h.policy.calls)-1]; string(got.Arguments) != string(args) || got.Tenant != "acme" || got.Session != "s1" {
		t.Errorf("guard saw %+v, want the real arguments", got)
	}
	// The pii guard saw only model-bound text; no tool call arguments.
	for _, txt := range h.pii.texts {
		if strings.Contains(txt, "/data/out/") {
			t.Errorf("detector was asked about tool arguments: %q", txt)
		}
	}

	// A restart: a new Guardrails over the same data_dir restores tokens.
	s2 := h.open(t, "acme", "s1")
	if back, _ := s2.Untokenize("[PHONE_1]"); back != "(212) 555-0100" {
		t.Errorf("second handle: %q", back)
	}
	checkNoValues(t, h.logs.String())
}

func checkNoValues(t *testing.T, logs string) {
	t.Helper()
	for _, v := range []string{"alice@example.com", "555-0100", "123-45-6789"} {
		if strings.Contains(logs, v) {
			t.Errorf("logs contain %q:\n%s", v, logs)
		}
	}
}

func TestPrepareCode(t *testing.T) {
	h := newHarness(t)
	s := h.open(t, "acme", "s1")
	ctx := t.Context()
	if _, err := s.Tokenize(ctx, "metadata at 169.254.169.254"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, code string
		rule       string // policy rule or "guard:<name>"; "" allowed
	}{
		{"plain", `print("hi")`, ""},
		{"deny_code on the literal text", `urlopen("http://169.254.169.254/")`, "deny_code"},
		{"deny_code sees through tokens", `urlopen("http://[IP_ADDRESS_1]/")`, "deny_code"},
		{"a guard refuses", `import ctypes  # ptrace`, "guard:policy"},
	}
	for _, tt := range tests {
		_, err := s.PrepareCode(ctx, tt.code)
		checkDenied(t, tt.name, err, tt.rule)
	}
	if !h.logs.contains(`"code denied"`) {
		t.Errorf("denials not logged:\n%s", h.logs.String())
	}
	checkNoValues(t, h.logs.String())
}

func checkDenied(t *testing.T, name string, err error, rule string) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return
	}
	var v *policy.Violation
	var d *guard.Denial
	switch {
	case !errors.Is(err, pluginapi.ErrDenied):
		t.Errorf("%s: %v, want a denial", name, err)
	case strings.HasPrefix(rule, "guard:"):
		if !errors.As(err, &d) || d.Guard != strings.TrimPrefix(rule, "guard:") {
			t.Errorf("%s: %v, want a denial by %s", name, err, rule)
		}
	case !errors.As(err, &v) || v.Rule != rule:
		t.Errorf("%s: %v, want a %s violation", name, err, rule)
	}
}

func TestToolCall(t *testing.T) {
	h := newHarness(t)
	s := h.open(t, "acme", "s1")
	ctx := t.Context()
	if _, err := s.Tokenize(ctx, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	x := s.Begin()
	tests := []struct {
		name, server, tool, args string
		rule                     string
	}{
		{"allowed", "filesystem", "read_text_file", `{"path":"/etc/hosts"}`, ""},
		{"denied tool", "memory", "delete_entities", `{}`, "deny"},
		{"constraint on the real value", "filesystem", "write_file", `{"path":"/tmp/[EMAIL_1]"}`, "constraint"},
		{"a guard refuses", "x", "forbidden", ``, "guard:policy"},
		{"fifth call exceeds max_tool_calls", "filesystem", "read_text_file", `{"path":"/a"}`, "max_tool_calls"},
	}
	for _, tt := range tests {
		_, err := x.ToolCall(ctx, tt.server, tt.tool, json.RawMessage(tt.args))
		checkDenied(t, tt.name, err, tt.rule)
	}
	if x.Calls() != 5 {
		t.Errorf("Calls = %d", x.Calls())
	}
	if _, err := s.Begin().ToolCall(ctx, "filesystem", "read_text_file", nil); err != nil {
		t.Errorf("a new execution has its own count: %v", err)
	}
	if _, err := x.ToolCall(ctx, "filesystem", "write_file", json.RawMessage(`{"path": [}`)); err == nil {
		t.Error("malformed arguments accepted")
	}
	if !h.logs.contains(`"tool call denied"`) || !h.logs.contains(`"rule":"constraint"`) {
		t.Errorf("denials not logged:\n%s", h.logs.String())
	}
	checkNoValues(t, h.logs.String())
}

func TestOutputBudget(t *testing.T) {
	h := newHarness(t)
	s := h.open(t, "acme", "s1") // max_output = 200
	ctx := t.Context()
	x := s.Begin()
	first := strings.Repeat("a", 100)
	if out, err := output(ctx, s, x, first); err != nil || out != first {
		t.Fatalf("within budget: %q, %v", out, err)
	}
	// 100 bytes left, for the text and the note.
	out, err := output(ctx, s, x, strings.Repeat("b", 20)+" alice@example.com "+strings.Repeat("c", 100))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, strings.Repeat("b", 20)+" [EMAIL_1] c") || !strings.Contains(out, "\n(output truncated: ") || len(out) > 100 {
		t.Errorf("truncated output = %q (%d bytes)", out, len(out))
	}
	if _, err := outputJSON(ctx, s, x, json.RawMessage(`{"k":"v"}`)); err == nil {
		t.Error("OutputJSON past the budget succeeded")
	} else {
		checkDenied(t, "OutputJSON past the budget", err, "max_output")
	}
	// A refused value does not use the budget.
	z := s.Begin()
	if _, err := outputJSON(ctx, s, z, json.RawMessage(`"`+strings.Repeat("j", 300)+`"`)); err == nil {
		t.Error("OutputJSON over max_output succeeded")
	}
	if out, err := output(ctx, s, z, first); err != nil || out != first {
		t.Errorf("after a refused value: %q, %v; want the whole text", out, err)
	}
	// Another tenant has no limit.
	ys := h.open(t, "other", "s1")
	y := ys.Begin()
	long := strings.Repeat("z", 10000)
	if out, err := output(ctx, ys, y, long); err != nil || out != long {
		t.Errorf("no max_output: %d bytes, %v", len(out), err)
	}
}

func TestTruncateKeepsTokensWhole(t *testing.T) {
	h := newHarness(t)
	s := h.open(t, "acme", "s2")
	ctx := t.Context()
	// Move the cut through the token: no cut may leave part of it.
	for pad := 120; pad < 200; pad++ {
		x := s.Begin()
		out, err := output(ctx, s, x, strings.Repeat("é", pad/2)+" alice@example.com "+strings.Repeat("x", 100))
		if err != nil {
			t.Fatal(err)
		}
		body, _, _ := strings.Cut(out, "\n(output truncated")
		if i := strings.LastIndexByte(body, '['); i >= 0 && !strings.HasSuffix(body[i:], "]") && !strings.Contains(body[i:], "]") {
			t.Fatalf("pad %d: cut inside a token: %q", pad, body[max(0, i-5):])
		}
		if strings.Contains(body, "alice") || !utf8.ValidString(body) {
			t.Fatalf("pad %d: bad cut %q", pad, body[max(0, len(body)-8):])
		}
		if len(out) > 200 {
			t.Fatalf("pad %d: %d bytes returned, max_output is 200", pad, len(out))
		}
	}
}

func TestPolicyAccessors(t *testing.T) {
	h := newHarness(t)
	if err := h.gr.Policy("acme").CheckTool("memory", "delete_entities"); err == nil {
		t.Error("acme may delete")
	}
	if err := h.gr.Policy("unknown").CheckTool("memory", "delete_entities"); err != nil {
		t.Errorf("a tenant without a policy is denied: %v", err)
	}
	s := h.open(t, "acme", "s1")
	if !s.Policy().Strict || s.Vault() == nil {
		t.Errorf("session policy %+v", s.Policy())
	}
	if _, err := guard.New(guard.Options{}); err == nil {
		t.Error("New without a vault store succeeded")
	}
	if _, err := h.gr.Open("acme", "../x"); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("Open with a bad session id = %v", err)
	}
}

// output is what the pipeline does with a text an execution returns:
// tokenize it, then charge it to max_output.
func output(ctx context.Context, s *guard.Session, x *guard.Execution, text string) (string, error) {
	toks, _, err := s.TokenizeTexts(ctx, []string{text}, nil)
	if err != nil {
		return "", err
	}
	return x.Charge(toks[0]), nil
}

// outputJSON is output for the structured result.
func outputJSON(ctx context.Context, s *guard.Session, x *guard.Execution, raw json.RawMessage) (json.RawMessage, error) {
	_, tok, err := s.TokenizeTexts(ctx, nil, raw)
	if err != nil {
		return nil, err
	}
	return x.ChargeJSON(tok)
}
