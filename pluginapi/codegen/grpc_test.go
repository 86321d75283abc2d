package codegen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

// recorder is a generator that remembers the request that reached it over
// the wire and answers with whatever the test put in it.
type recorder struct {
	got  codegen.GenerateRequest
	resp codegen.GenerateResponse
	err  error
}

func (r *recorder) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "rec", Kind: pluginapi.KindCodegen, Version: "0.1.0", APIVersions: []string{"v1"}}, nil
}

func (r *recorder) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, r.err
}

func (r *recorder) Generate(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
	r.got = req
	return r.resp, r.err
}

func TestGenerateRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		req  codegen.GenerateRequest
		resp codegen.GenerateResponse
	}{
		{
			name: "full request",
			req: codegen.GenerateRequest{
				Task: "count lines in /workspace/a.txt",
				Tools: []codegen.Tool{{
					ID: "fs/read", Server: "fs", Name: "read", Description: "Read a file",
					Module: "servers.fs", Function: "read", StubSource: "def read(path): ...",
					InputSchema: json.RawMessage(`{"type":"object"}`),
				}},
				Skills:           []codegen.Skill{{Name: "wc", Description: "count", Source: "def wc(): ..."}},
				Language:         "python",
				Previous:         &codegen.Attempt{Code: "print(x)", Error: "NameError: x"},
				WorkspaceListing: []string{"a.txt", "dir/b.txt"},
			},
			resp: codegen.GenerateResponse{
				Code:  "print(len(open('/workspace/a.txt').readlines()))",
				Usage: codegen.Usage{PromptTokens: 120, CompletionTokens: 30},
				Model: "m-1",
			},
		},
		{
			name: "no previous attempt, gave up with a diagnostic",
			req:  codegen.GenerateRequest{Task: "fly", Language: "python"},
			resp: codegen.GenerateResponse{
				Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", "no rule matches", "task: fly")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			impl := &recorder{resp: tt.resp}
			c := plugintest.Codegen(t, impl)
			plugintest.CheckInfo(t, c, pluginapi.KindCodegen)
			got, err := c.Generate(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(impl.got, tt.req) {
				t.Errorf("plugin got %#v, want %#v", impl.got, tt.req)
			}
			if !reflect.DeepEqual(got, tt.resp) {
				t.Errorf("Generate = %#v, want %#v", got, tt.resp)
			}
		})
	}
}

func TestGenerateError(t *testing.T) {
	c := plugintest.Codegen(t, &recorder{err: fmt.Errorf("model quota: %w", pluginapi.ErrResourceExhausted)})
	_, err := c.Generate(t.Context(), codegen.GenerateRequest{Task: "x"})
	if !errors.Is(err, pluginapi.ErrResourceExhausted) || err.Error() != "model quota: resource exhausted" {
		t.Errorf("Generate error = %v, want ErrResourceExhausted with the plugin's message", err)
	}
	if _, err := c.Configure(t.Context(), nil, "v1"); !errors.Is(err, pluginapi.ErrResourceExhausted) {
		t.Errorf("Configure error = %v", err)
	}
}
