package guard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/pluginapi"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

func TestGuardsCheckCode(t *testing.T) {
	tests := []struct {
		name    string
		plugins []*fakeGuard
		strict  bool
		want    string // "" allows; else the error text
	}{
		{"no guards", nil, false, ""},
		{"all allow", []*fakeGuard{{code: allow}, {code: allow}}, false, ""},
		{"unimplemented is skipped", []*fakeGuard{{}, {code: allow}}, true, ""},
		{"a decision denies with its diagnostics",
			[]*fakeGuard{{code: allow}, {code: func(guardapi.CheckCodeRequest) (guardapi.Decision, error) {
				return deny("shell access denied", "os.system is not allowed"), nil
			}}},
			false, "guard g1: shell access denied: os.system is not allowed"},
		{"a denial without diagnostics",
			[]*fakeGuard{{code: func(guardapi.CheckCodeRequest) (guardapi.Decision, error) { return guardapi.Decision{}, nil }}},
			false, "guard g0: refused the code"},
		{"an ErrDenied error denies even when not strict",
			[]*fakeGuard{{code: func(guardapi.CheckCodeRequest) (guardapi.Decision, error) {
				return guardapi.Decision{}, fmt.Errorf("no way: %w", pluginapi.ErrDenied)
			}}},
			false, "guard g0: no way: denied"},
		{"a failing guard is skipped when not strict",
			[]*fakeGuard{{code: func(guardapi.CheckCodeRequest) (guardapi.Decision, error) {
				return guardapi.Decision{}, errors.New("disk on fire")
			}}, {code: allow}},
			false, ""},
		{"a failing guard denies when strict",
			[]*fakeGuard{{code: func(guardapi.CheckCodeRequest) (guardapi.Decision, error) {
				return guardapi.Decision{}, errors.New("disk on fire")
			}}},
			true, "guard g0: unavailable, and the tenant's policy is strict, so CheckCode fails closed: rpc error: code = Unknown desc = disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var named []guard.Named
			for i, f := range tt.plugins {
				p, _ := serve(t, f)
				named = append(named, guard.Named{Name: fmt.Sprintf("g%d", i), Plugin: p})
			}
			g := guard.NewGuards(named, nil).WithStrict(tt.strict)
			req := guardapi.CheckCodeRequest{Tenant: "acme", Session: "s1", Code: "print(1)"}
			err := g.CheckCode(t.Context(), req)
			got := ""
			if err != nil {
				got = err.Error()
				var d *guard.Denial
				if !errors.As(err, &d) || !errors.Is(err, pluginapi.ErrDenied) {
					t.Errorf("error %v is not a *Denial wrapping ErrDenied", err)
				}
			}
			if got != tt.want {
				t.Errorf("CheckCode = %q, want %q", got, tt.want)
			}
			for _, f := range tt.plugins {
				for _, r := range f.codes {
					if r != req {
						t.Errorf("plugin got %+v, want %+v", r, req)
					}
				}
			}
		})
	}
}

func TestGuardsCheckToolCall(t *testing.T) {
	f := &fakeGuard{call: func(req guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
		if req.Tool == "delete" {
			return deny("destructive", "deleting is not allowed"), nil
		}
		return guardapi.Decision{Allow: true}, nil
	}}
	p, _ := serve(t, f)
	g := guard.NewGuards([]guard.Named{{Name: "pol", Plugin: p}}, nil)
	req := guardapi.CheckToolCallRequest{Tenant: "acme", Session: "s1", Server: "fs", Tool: "read", Arguments: []byte(`{"path":"/a"}`)}
	if err := g.CheckToolCall(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || string(f.calls[0].Arguments) != `{"path":"/a"}` {
		t.Errorf("plugin got %+v", f.calls)
	}
	req.Tool = "delete"
	err := g.CheckToolCall(t.Context(), req)
	if err == nil || err.Error() != "guard pol: destructive: deleting is not allowed" {
		t.Errorf("CheckToolCall(delete) = %v", err)
	}
}

// TestStrictWhenThePluginStops stops a guard plugin's gRPC server, as a
// crash does, and checks every hook through the real adapter: strict
// fails closed naming the guard; non-strict checks carry on with a
// warning while detection fails closed unless pii_fail_open.
func TestStrictWhenThePluginStops(t *testing.T) {
	f := piiGuard(t)
	f.code, f.call = allow, func(guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
		return guardapi.Decision{Allow: true}, nil
	}
	p, stop := serve(t, f)
	var logs logBuffer
	g := guard.NewGuards([]guard.Named{{Name: "pii", Plugin: p}}, logs.logger())
	ctx := t.Context()
	spans, err := g.Detect(ctx, guardapi.DetectRequest{Text: "mail alice@example.com"})
	if err != nil || len(spans) != 1 || spans[0].Type != "EMAIL" {
		t.Fatalf("Detect while running = %v, %v", spans, err)
	}
	stop()

	hooks := map[string]func(*guard.Guards) error{
		"CheckCode": func(g *guard.Guards) error {
			return g.CheckCode(ctx, guardapi.CheckCodeRequest{Code: "x"})
		},
		"CheckToolCall": func(g *guard.Guards) error {
			return g.CheckToolCall(ctx, guardapi.CheckToolCallRequest{Server: "s", Tool: "t"})
		},
		"Detect": func(g *guard.Guards) error {
			spans, err := g.Detect(ctx, guardapi.DetectRequest{Text: "mail alice@example.com"})
			if err == nil && len(spans) > 0 {
				t.Errorf("Detect on a stopped plugin found %v", spans)
			}
			return err
		},
	}
	for name, call := range hooks {
		err := call(g.WithStrict(true))
		var d *guard.Denial
		if !errors.As(err, &d) || d.Guard != "pii" || d.Hook != name ||
			!errors.Is(err, pluginapi.ErrDenied) || !errors.Is(err, pluginapi.ErrPluginShutdown) {
			t.Errorf("strict %s on a stopped plugin = %v, want a Denial by pii wrapping ErrDenied and ErrPluginShutdown", name, err)
		} else if !strings.Contains(err.Error(), "guard pii: unavailable, and the tenant's policy is strict, so "+name+" fails closed") {
			t.Errorf("strict %s message: %v", name, err)
		}
		// Without strict, the checks carry on but detection fails closed
		// unless the policy opts into pii_fail_open.
		err = call(g.WithStrict(false))
		if name != "Detect" && err != nil {
			t.Errorf("non-strict %s on a stopped plugin = %v, want nil", name, err)
		}
		if name == "Detect" && (!errors.As(err, &d) || !errors.Is(err, pluginapi.ErrPluginShutdown) ||
			!strings.Contains(err.Error(), "guard pii: unavailable (stopped or restarting), so nothing was returned; try again")) {
			t.Errorf("non-strict Detect on a stopped plugin = %v, want a Denial saying to try again", err)
		}
		if err := call(g.WithStrict(false).WithDetectOpen(true)); err != nil {
			t.Errorf("pii_fail_open %s on a stopped plugin = %v, want nil", name, err)
		}
		if err := call(g.WithStrict(true).WithDetectOpen(true)); err == nil {
			t.Errorf("strict with pii_fail_open %s on a stopped plugin = nil, want a Denial", name)
		}
	}
	for _, msg := range []string{"guard unavailable, continuing without it", "guard unavailable, denying", "guard unavailable, withholding model-facing output"} {
		if !logs.contains(msg) {
			t.Errorf("no warning %q logged:\n%s", msg, logs.String())
		}
	}
}

func TestMissingGuard(t *testing.T) {
	g := guard.NewGuards([]guard.Named{{Name: "pii", Plugin: guard.Missing(errors.New("start plugin pii: exec format error"))}}, nil)
	err := g.WithStrict(true).CheckCode(t.Context(), guardapi.CheckCodeRequest{Code: "x"})
	if !errors.Is(err, pluginapi.ErrPluginShutdown) || !strings.Contains(err.Error(), "exec format error") {
		t.Errorf("strict = %v", err)
	}
	if err := g.CheckCode(t.Context(), guardapi.CheckCodeRequest{Code: "x"}); err != nil {
		t.Errorf("non-strict = %v", err)
	}
}

// TestCallerCancellation: a cancelled request is the caller's error, not
// a guard failure, in either mode.
func TestCallerCancellation(t *testing.T) {
	f := &fakeGuard{code: func(guardapi.CheckCodeRequest) (guardapi.Decision, error) {
		return guardapi.Decision{Allow: true}, nil
	}}
	p, _ := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, strict := range []bool{false, true} {
		err := guard.NewGuards([]guard.Named{{Name: "g", Plugin: p}}, nil).WithStrict(strict).CheckCode(ctx, guardapi.CheckCodeRequest{Code: "x"})
		var d *guard.Denial
		if !errors.Is(err, context.Canceled) || errors.As(err, &d) {
			t.Errorf("strict=%v: %v, want context.Canceled and no Denial", strict, err)
		}
	}
}

// TestDetectUnion merges the spans of two guards and offsets spans of a
// text sent in chunks.
func TestDetectUnion(t *testing.T) {
	words := func(word, typ string) *fakeGuard {
		return &fakeGuard{detect: func(req guardapi.DetectRequest) ([]guardapi.Span, error) {
			var out []guardapi.Span
			for off := 0; ; {
				i := strings.Index(req.Text[off:], word)
				if i < 0 {
					return out, nil
				}
				out = append(out, guardapi.Span{Start: off + i, End: off + i + len(word), Type: typ})
				off += i + len(word)
			}
		}}
	}
	a, b := words("alpha", "A"), words("beta", "B")
	pa, _ := serve(t, a)
	pb, _ := serve(t, b)
	unimpl, _ := serve(t, &fakeGuard{})
	g := guard.NewGuards([]guard.Named{{Name: "a", Plugin: pa}, {Name: "b", Plugin: pb}, {Name: "none", Plugin: unimpl}}, nil)

	// 3 MiB of lines: three or more chunks.
	var sb strings.Builder
	for i := 0; sb.Len() < 3<<20; i++ {
		fmt.Fprintf(&sb, "line %d alpha and beta\n", i)
	}
	text := sb.String()
	spans, err := g.Detect(t.Context(), guardapi.DetectRequest{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(text, "alpha") + strings.Count(text, "beta")
	if len(spans) != want {
		t.Errorf("%d spans, want %d", len(spans), want)
	}
	for _, s := range spans {
		if got := text[s.Start:s.End]; got != map[string]string{"A": "alpha", "B": "beta"}[s.Type] {
			t.Fatalf("span %+v covers %q", s, got)
		}
	}
	if len(a.texts) < 3 {
		t.Errorf("guard a got %d requests, want the text in chunks", len(a.texts))
	}
	for _, c := range a.texts {
		if len(c) > guard.DefaultChunk || !strings.HasSuffix(c, "\n") {
			t.Errorf("chunk of %d bytes ending %q", len(c), c[max(0, len(c)-10):])
		}
	}
	if strings.Join(a.texts, "") != text {
		t.Error("chunks do not add up to the text")
	}
}

// TestDetectFailureIsNotRestart: a detection that fails for a reason a
// retry meets again (here gRPC refusing text that is not UTF-8, through
// the real adapter) withholds the output without saying to try again.
func TestDetectFailureIsNotRestart(t *testing.T) {
	p, _ := serve(t, piiGuard(t))
	g := guard.NewGuards([]guard.Named{{Name: "pii", Plugin: p}}, nil)
	_, err := g.Detect(t.Context(), guardapi.DetectRequest{Text: "caf\xe9 alice@example.com"})
	var d *guard.Denial
	if !errors.As(err, &d) || d.Hook != "Detect" || guard.Restarting(err) {
		t.Fatalf("Detect = %v, want a Denial that is not a restart", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "guard pii: failed (") || strings.Contains(msg, "try again") {
		t.Errorf("message %q: want it to say the guard failed, without try again", msg)
	}
}

// TestDetectValuesAcrossChunks: a text over the chunk size that has no
// line end to cut at (a CSV on one line, JSON, a phone number's spaces)
// is cut inside a value; the value must still be found whole, or part of
// it (or all of it, when neither half looks like an e-mail) reaches the
// model raw.
func TestDetectValuesAcrossChunks(t *testing.T) {
	p, _ := serve(t, piiGuard(t))
	g := guard.NewGuards([]guard.Named{{Name: "pii", Plugin: p}}, nil)
	tests := []struct {
		name, value, sep string
	}{
		{"an e-mail after a comma", "jane.doe@example.com", ","},
		{"a phone number with spaces", "+1 415 555 0132", ","},
		{"a card with spaces", "4111 1111 1111 1111", "|"},
	}
	for _, tc := range tests {
		// The value starts just before the chunk's end, so that the cut
		// falls at its start, middle and end.
		for _, before := range []int{2, len(tc.value) / 2, len(tc.value) - 2} {
			start := guard.DefaultChunk - before
			text := strings.Repeat("x", start-len(tc.sep)) + tc.sep + tc.value + tc.sep + "tail"
			spans, err := g.Detect(t.Context(), guardapi.DetectRequest{Text: text})
			if err != nil {
				t.Fatal(err)
			}
			covered := make([]bool, len(text))
			for _, s := range spans {
				for i := s.Start; i < s.End; i++ {
					covered[i] = true
				}
			}
			if slices.Contains(covered[start:start+len(tc.value)], false) {
				t.Errorf("%s, %d bytes of it in the first chunk: not covered whole by %+v", tc.name, before, spans)
			}
		}
	}
}
