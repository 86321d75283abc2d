package llm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

// BenchmarkGenerateOverhead measures what the plugin adds around a model
// call: gRPC both ways, the prompt, one HTTP round trip to a local server
// that answers at once, extraction, and the compile check (a Python start).
func BenchmarkGenerateOverhead(b *testing.B) {
	reply, _ := json.Marshal(map[string]any{
		"id": "x", "model": "m", "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": fencedReply(goodProgram)}}},
		"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	defer srv.Close()
	c := plugintest.Codegen(b, &Generator{log: hclog.NewNullLogger()})
	raw, _ := json.Marshal(map[string]any{"provider": "openai_compatible", "model": "m", "base_url": srv.URL + "/v1"})
	if diags, err := c.Configure(context.Background(), raw, codegen.APIVersion); err != nil || diags.HasErrors() {
		b.Fatalf("configure: %v %+v", err, diags)
	}
	req := sampleRequest(b)
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Generate(context.Background(), req)
		if err != nil || resp.Code == "" {
			b.Fatalf("generate: %v %+v", err, resp.Diagnostics)
		}
	}
}

func BenchmarkBuildPrompt(b *testing.B) {
	req := sampleRequest(b)
	for b.Loop() {
		_ = buildPrompt(req)
	}
}

func BenchmarkExtractCode(b *testing.B) {
	r := fencedReply(goodProgram)
	for b.Loop() {
		_ = extractCode(r)
	}
}

// BenchmarkCompileCheck is one compile check: mostly the Python start.
func BenchmarkCompileCheck(b *testing.B) {
	python := testPython(b)
	for b.Loop() {
		if err := checkCompiles(context.Background(), python, goodProgram); err != nil {
			b.Fatal(err)
		}
	}
}
