package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

// detectOnly implements only Detect; the other hooks come from
// guard.Unimplemented. It finds the word "secret".
type detectOnly struct {
	guard.Unimplemented
	got guard.DetectRequest
}

func (d *detectOnly) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "detect-only", Kind: pluginapi.KindGuard, Version: "0.1.0", APIVersions: []string{"v1"}}, nil
}

func (d *detectOnly) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (d *detectOnly) Detect(_ context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	d.got = req
	var spans []guard.Span
	for off := 0; ; {
		i := strings.Index(req.Text[off:], "secret")
		if i < 0 {
			return spans, nil
		}
		spans = append(spans, guard.Span{Start: off + i, End: off + i + 6, Type: "SECRET", Score: 0.9})
		off += i + 6
	}
}

// policy implements the two check hooks and leaves Detect unimplemented.
type policy struct {
	guard.Unimplemented
	code guard.CheckCodeRequest
	call guard.CheckToolCallRequest
}

func (p *policy) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "policy", Kind: pluginapi.KindGuard, Version: "0.1.0", APIVersions: []string{"v1"}}, nil
}

func (p *policy) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (p *policy) CheckCode(_ context.Context, req guard.CheckCodeRequest) (guard.Decision, error) {
	p.code = req
	if strings.Contains(req.Code, "os.system") {
		return guard.Decision{Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", "shell access denied", "os.system is not allowed")}}, nil
	}
	return guard.Decision{Allow: true}, nil
}

func (p *policy) CheckToolCall(_ context.Context, req guard.CheckToolCallRequest) (guard.Decision, error) {
	p.call = req
	if req.Tool == "delete" {
		return guard.Decision{}, fmt.Errorf("tool %s/%s: %w", req.Server, req.Tool, pluginapi.ErrDenied)
	}
	return guard.Decision{Allow: true}, nil
}

func TestUnimplementedHooks(t *testing.T) {
	d := plugintest.Guard(t, &detectOnly{})
	p := plugintest.Guard(t, &policy{})
	tests := []struct {
		name string
		call func() error
	}{
		{"CheckCode", func() error { _, err := d.CheckCode(t.Context(), guard.CheckCodeRequest{Code: "1"}); return err }},
		{"CheckToolCall", func() error {
			_, err := d.CheckToolCall(t.Context(), guard.CheckToolCallRequest{Tool: "t"})
			return err
		}},
		{"Detect", func() error { _, err := p.Detect(t.Context(), guard.DetectRequest{Text: "x"}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, pluginapi.ErrUnimplemented) {
				t.Errorf("%s on a guard without it = %v, want ErrUnimplemented", tt.name, err)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	impl := &detectOnly{}
	g := plugintest.Guard(t, impl)
	plugintest.CheckInfo(t, g, pluginapi.KindGuard)
	req := guard.DetectRequest{Text: "a secret and another secret", Types: []string{"SECRET"}}
	spans, err := g.Detect(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []guard.Span{{Start: 2, End: 8, Type: "SECRET", Score: 0.9}, {Start: 21, End: 27, Type: "SECRET", Score: 0.9}}
	if !reflect.DeepEqual(spans, want) {
		t.Errorf("Detect = %#v, want %#v", spans, want)
	}
	if !reflect.DeepEqual(impl.got, req) {
		t.Errorf("plugin got %#v, want %#v", impl.got, req)
	}
}

func TestChecks(t *testing.T) {
	impl := &policy{}
	g := plugintest.Guard(t, impl)
	ctx := t.Context()

	tests := []struct {
		name      string
		code      string
		wantAllow bool
		wantDiag  string
	}{
		{"allowed", "print(1)", true, ""},
		{"denied with reason", "import os; os.system('ls')", false, "shell access denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := guard.CheckCodeRequest{Tenant: "t1", Session: "s1", Code: tt.code}
			d, err := g.CheckCode(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if impl.code != req {
				t.Errorf("plugin got %#v, want %#v", impl.code, req)
			}
			if d.Allow != tt.wantAllow {
				t.Errorf("Allow = %v, want %v", d.Allow, tt.wantAllow)
			}
			if tt.wantDiag != "" && (len(d.Diagnostics) != 1 || d.Diagnostics[0].Summary != tt.wantDiag) {
				t.Errorf("Diagnostics = %#v, want %q", d.Diagnostics, tt.wantDiag)
			}
		})
	}

	call := guard.CheckToolCallRequest{Tenant: "t1", Session: "s1", Server: "fs", Tool: "read", Arguments: json.RawMessage(`{"path":"/a"}`)}
	d, err := g.CheckToolCall(ctx, call)
	if err != nil || !d.Allow {
		t.Fatalf("CheckToolCall = %#v, %v", d, err)
	}
	if !reflect.DeepEqual(impl.call, call) {
		t.Errorf("plugin got %#v, want %#v", impl.call, call)
	}
	_, err = g.CheckToolCall(ctx, guard.CheckToolCallRequest{Server: "fs", Tool: "delete"})
	if !errors.Is(err, pluginapi.ErrDenied) || err.Error() != "tool fs/delete: denied" {
		t.Errorf("denied tool call error = %v, want ErrDenied with the plugin's message", err)
	}
}
