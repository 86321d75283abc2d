package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cexec/cexec/core/bridge"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/internal/testutil/piitest"
	"github.com/cexec/cexec/pluginapi"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// piiGuard detects the common PII types with plain regular expressions
// (piitest.Detector); it has no code or tool call checks. It counts its
// Detect calls.
type piiGuard struct {
	d       piitest.Detector
	detects *atomic.Int32
}

func (piiGuard) CheckCode(context.Context, guardapi.CheckCodeRequest) (guardapi.Decision, error) {
	return guardapi.Decision{}, pluginapi.ErrUnimplemented
}

func (piiGuard) CheckToolCall(context.Context, guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
	return guardapi.Decision{}, pluginapi.ErrUnimplemented
}

func (g piiGuard) Detect(ctx context.Context, req guardapi.DetectRequest) ([]guardapi.Span, error) {
	g.detects.Add(1)
	return g.d.Detect(ctx, req)
}

// openGuard returns a session of tenant "acme" under p, with piiGuard or,
// when down, a guard that fails every call, and the count of
// Detect calls.
func openGuard(t *testing.T, p *policy.Policy, down bool) (*guard.Session, *atomic.Int32) {
	t.Helper()
	detects := new(atomic.Int32)
	var plugin guard.Plugin = guard.Missing(errors.New("guard-pii was killed"))
	if !down {
		plugin = piiGuard{detects: detects}
	}
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := guard.New(guard.Options{Guards: []guard.Named{{Name: "pii", Plugin: plugin}},
		Policies: map[string]*policy.Policy{"acme": p}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gr.Open("acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, detects
}

// TestTokenizeResult checks the model-facing form of results: every text
// tokenized with the session's tokens in one detection (names the program
// chose included: exception classes, servers and tools it tried to call),
// max_output enforced, and nothing returned when the output cannot be
// checked. It is one table with one set of checks, hence its length.
func TestTokenizeResult(t *testing.T) {
	const email, phone = "jane.roe@example.com", "+1 650-253-0000"
	full := func() *CodeResult {
		return &CodeResult{
			ExecResult: sandbox.ExecResult{
				ExitCode: 1,
				Result:   json.RawMessage(`{"to":"` + email + `","n":3}`),
				Error:    &sandbox.ExecError{Type: "ValueError", Message: "cannot reach " + email, Traceback: "line 3: mail(" + email + ")"},
			},
			Stdout:    []byte("sending to " + email + "\n"),
			Stderr:    []byte("call " + phone + "\n"),
			ToolCalls: []bridge.CallRecord{{Server: "mail", Tool: "send", Error: "unknown address " + email}},
			Summary:   bridge.Summary{Calls: 1, Failed: 1, Tools: []bridge.ToolSummary{{Server: "mail", Tool: "send", Calls: 1, Failed: 1, LastError: "unknown address " + email}}},
		}
	}
	ok := func() *CodeResult {
		r := full()
		r.ExitCode, r.Error = 0, nil
		return r
	}
	for _, tc := range []struct {
		name   string
		policy policy.Policy
		down   bool
		in     *CodeResult
		// want* are the texts after tokenizing; wantError is
		// "Type: Message".
		wantStdout, wantStderr, wantResult, wantError, wantCallError string
	}{
		{
			name:          "every text tokenized alike",
			in:            full(),
			wantStdout:    "sending to [EMAIL_1]\n",
			wantStderr:    "call [PHONE_1]\n",
			wantResult:    `{"to":"[EMAIL_1]","n":3}`,
			wantError:     "ValueError: cannot reach [EMAIL_1]",
			wantCallError: "unknown address [EMAIL_1]",
		},
		{
			name:       "stdout cut at max_output after the result",
			policy:     policy.Policy{MaxOutput: 90},
			in:         &CodeResult{ExecResult: sandbox.ExecResult{Result: json.RawMessage(`"` + email + `"`)}, Stdout: []byte(strings.Repeat("mail "+email+"\n", 10))},
			wantStdout: "mail [EMAIL_1]\nmai\n(output truncated: 71 more bytes exceed max_output 90 bytes)",
			wantResult: `"[EMAIL_1]"`,
		},
		{
			name:   "result over max_output is withheld",
			policy: policy.Policy{MaxOutput: 10},
			in:     ok(),
			// The refused result leaves the budget to stdout.
			wantStdout:    "\n(output truncated: 11 more bytes exceed max_output 10 bytes)",
			wantStderr:    "\n(output truncated: 26 more bytes exceed max_output 10 bytes)",
			wantError:     "PermissionError: the result was withheld: policy: output of 24 bytes exceeds max_output (10 bytes)",
			wantCallError: "unknown address [EMAIL_1]",
		},
		{
			name:   "result over max_output beside the program's error",
			policy: policy.Policy{MaxOutput: 10},
			in:     full(),
			// The error's own texts used the budget first.
			wantStdout:    "\n(output truncated: 56 more bytes exceed max_output 10 bytes)",
			wantStderr:    "\n(output truncated: 71 more bytes exceed max_output 10 bytes)\ncexec: the result was withheld: policy: output of 24 bytes exceeds max_output (10 bytes)",
			wantError:     "ValueError: \n(output truncated: 12 more bytes exceed max_output 10 bytes)",
			wantCallError: "unknown address [EMAIL_1]",
		},
		{
			name: "names the program chose",
			in: &CodeResult{
				ExecResult: sandbox.ExecResult{ExitCode: 1, Error: &sandbox.ExecError{Type: email, Message: "raised"}},
				ToolCalls:  []bridge.CallRecord{{Server: email, Tool: phone, Error: "no server " + email}},
				Summary:    bridge.Summary{Calls: 1, Failed: 1, Tools: []bridge.ToolSummary{{Server: email, Tool: phone, Calls: 1, Failed: 1, LastError: "no server " + email}}},
			},
			wantError:     "[EMAIL_1]: raised",
			wantCallError: "no server [EMAIL_1]",
		},
		{
			name:      "strict tenant, guard down: nothing returned",
			policy:    policy.Policy{Strict: true},
			down:      true,
			in:        full(),
			wantError: "OutputWithheld: the program ran, but guard pii, which checks its output for sensitive data, is unavailable (stopped or restarting); nothing of the output was returned; try again in a moment",
		},
		{
			name:      "default tenant, guard down: nothing returned, try again",
			down:      true,
			in:        full(),
			wantError: "OutputWithheld: the program ran, but guard pii, which checks its output for sensitive data, is unavailable (stopped or restarting); nothing of the output was returned; try again in a moment",
		},
		{
			name:          "pii_fail_open tenant, guard down: the output unchecked",
			policy:        policy.Policy{PIIFailOpen: true},
			down:          true,
			in:            ok(),
			wantStdout:    "sending to " + email + "\n",
			wantStderr:    "call " + phone + "\n",
			wantResult:    `{"to":"` + email + `","n":3}`,
			wantCallError: "unknown address " + email,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, detects := openGuard(t, &tc.policy, tc.down)
			out := tokenizeResult(t.Context(), s, s.Begin(), tc.in)
			// A withheld result costs a second detection for its message.
			if n := detects.Load(); !tc.down && n != 1 && !strings.Contains(tc.wantError+tc.wantStderr, "withheld") {
				t.Errorf("%d detections, want 1", n)
			}
			if !out.Tokenized {
				t.Error("Tokenized is not set")
			}
			gotErr := ""
			if out.Error != nil {
				gotErr = out.Error.Type + ": " + out.Error.Message
			}
			for _, c := range []struct{ what, got, want string }{
				{"stdout", string(out.Stdout), tc.wantStdout},
				{"stderr", string(out.Stderr), tc.wantStderr},
				{"result", string(out.Result), tc.wantResult},
				{"error", gotErr, tc.wantError},
			} {
				if c.got != c.want {
					t.Errorf("%s\n  %q\nwant\n  %q", c.what, c.got, c.want)
				}
			}
			for _, c := range out.ToolCalls {
				if strings.Contains(c.Server+c.Tool, email) || strings.Contains(c.Server+c.Tool, phone) {
					t.Errorf("tool call names keep PII: %s/%s", c.Server, c.Tool)
				}
				if c.Error != tc.wantCallError {
					t.Errorf("tool call error %q, want %q", c.Error, tc.wantCallError)
				}
			}
			for _, c := range out.Summary.Tools {
				if strings.Contains(c.Server+c.Tool, email) || strings.Contains(c.Server+c.Tool, phone) {
					t.Errorf("summary names keep PII: %s/%s", c.Server, c.Tool)
				}
				if c.LastError != tc.wantCallError {
					t.Errorf("summary last error %q, want %q", c.LastError, tc.wantCallError)
				}
			}
			if tb := out.Error; tb != nil && strings.Contains(tb.Traceback, email) {
				t.Errorf("traceback keeps the address: %q", tb.Traceback)
			}
		})
	}
}

// TestCutNeverLeaksAValue cuts a line holding an email at every length,
// the way the sandbox's output cap does (raw text, before tokenizing),
// and at every max_output (after tokenizing): the address comes back as
// its token or not at all, never as a prefix ("jane.roe@exam").
func TestCutNeverLeaksAValue(t *testing.T) {
	const text = "word word word word word word word word word word word word word word word word " +
		"word word word word word word word word word word word word word word word word " +
		"word word word word word word word word word word word word word word word word " +
		"word word word word word mail jane.roe@example.com now"
	// Every prefix of the address starts with "j", which nothing else in
	// the text or the tokenized form holds.
	check := func(what, got string) {
		t.Helper()
		if strings.Contains(got, "j") {
			t.Errorf("%s: a part of the address leaked: %q", what, got)
		}
	}
	// The address and the words around it; the cap applies after the
	// tokenized text shrank and leaves room for its note.
	for n := len(text) - 60; n <= len(text); n++ {
		s, _ := openGuard(t, &policy.Policy{}, false)
		out := tokenizeResult(t.Context(), s, s.Begin(), &CodeResult{
			ExecResult: sandbox.ExecResult{OutputTruncated: n < len(text)}, Stdout: []byte(text[:n])})
		check(fmt.Sprintf("sandbox cut at %d", n), string(out.Stdout))
		if n == len(text) && !strings.Contains(string(out.Stdout), "[EMAIL_1]") {
			t.Errorf("the whole text: %q", out.Stdout)
		}
	}
	for limit := len(text) - 100; limit <= len(text)+100; limit++ {
		s, _ := openGuard(t, &policy.Policy{MaxOutput: int64(limit)}, false)
		out := tokenizeResult(t.Context(), s, s.Begin(), &CodeResult{Stdout: []byte(text)})
		check(fmt.Sprintf("max_output %d", limit), string(out.Stdout))
		if strings.Contains(string(out.Stdout), "[EMAIL") && !strings.Contains(string(out.Stdout), "[EMAIL_1]") {
			t.Errorf("max_output %d split the token: %q", limit, out.Stdout)
		}
	}
}

// TestSandboxCutNote: what the sandbox's cut leaves unchecked is dropped,
// and a note at the end of the stream says how much, so that an agent
// whose long line vanished knows why.
func TestSandboxCutNote(t *testing.T) {
	const note = "bytes of an unfinished line were dropped at the output limit"
	long := strings.Repeat("word ", 60)
	tests := []struct {
		name           string
		stdout, stderr string
		cut            bool
		wantOut        string
		wantErr        string
	}{
		{"one long line", strings.Repeat("x", 5000), "", true, "(5000 " + note, ""},
		{"an unfinished line after finished ones", "done\n" + strings.Repeat("x", 300), "", true, "done\n(300 " + note, ""},
		{"the end of a long line", long + "mail jane.doe@cor", "", true, long[:60] + fmt.Sprintf("\n(%d %s", len(long)-60+len("mail jane.doe@cor"), note), ""},
		{"stderr cut", "ok\n", "warn\n" + strings.Repeat("y", 300), true, "ok\n", "warn\n(300 " + note},
		{"a finished line", "done\n", "", true, "done\n", ""},
		{"not cut", strings.Repeat("x", 5000), "", false, strings.Repeat("x", 5000), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openGuard(t, &policy.Policy{}, false)
			out := tokenizeResult(t.Context(), s, s.Begin(), &CodeResult{
				ExecResult: sandbox.ExecResult{OutputTruncated: tt.cut}, Stdout: []byte(tt.stdout), Stderr: []byte(tt.stderr)})
			if got := string(out.Stdout); !strings.HasPrefix(got, tt.wantOut) || tt.wantOut == "" != (got == "") {
				t.Errorf("stdout %.120q…, want it to start %.120q", got, tt.wantOut)
			}
			if got := string(out.Stderr); !strings.HasPrefix(got, tt.wantErr) || tt.wantErr == "" != (got == "") {
				t.Errorf("stderr %.120q…, want it to start %.120q", got, tt.wantErr)
			}
			if strings.Contains(string(out.Stdout), "jane") {
				t.Errorf("stdout shows a cut value: %q", out.Stdout)
			}
		})
	}
}

func TestDropCutTail(t *testing.T) {
	long := strings.Repeat("word ", 60)
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"done\n", "done\n"},
		{"a\nmail jane.doe@cor", "a\n"},
		{"mail jane.doe@cor", ""},
		{long + "mail jane.doe@cor", long[:60]},
		{`{"a":"` + long + `","b":"jane.doe@cor`, `{"a":"` + long[:60]},
		// A space between digits may sit inside a number.
		{"a " + strings.Repeat("x", 250) + " 4111 1111 " + strings.Repeat("y", 250), "a "},
		{strings.Repeat("x", 300), ""},
	} {
		if got := dropCutTail(tc.in); got != tc.want {
			t.Errorf("dropCutTail(%.20q…) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
