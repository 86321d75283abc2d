package llm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/codegen"
)

// The tests in this file run the plugin over real gRPC against an OpenAI
// chat completions protocol server: real HTTP, the request shape checked,
// the replies, errors and headers OpenAI sends.

// openAIReply is a chat completion answering text.
func openAIReply(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "served-model-2026-01-01",
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text},
			}},
			"usage": map[string]any{"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
		})
	}
}

// openAIError answers with OpenAI's error envelope.
func openAIError(status int, message, param, code string, header map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		e := map[string]any{"message": message, "type": "invalid_request_error", "code": code}
		if param != "" {
			e["param"] = param
		}
		writeJSON(w, status, map[string]any{"error": e})
	}
}

func openAIConfig(url string, extra map[string]any) map[string]any {
	cfg := map[string]any{
		"provider": "openai", "model": "gpt-4o-mini", "base_url": url + "/v1",
		"api_key": testKey, "temperature": 0.2, "max_tokens": 2000,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// checkChatShape asserts what every chat completions request must carry.
func checkChatShape(t *testing.T, r recorded, model string) {
	t.Helper()
	if r.method != http.MethodPost || r.path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", r.method, r.path)
	}
	if got := r.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if r.body["model"] != model {
		t.Errorf("model = %v, want %s", r.body["model"], model)
	}
	msgs, _ := r.body["messages"].([]any)
	if len(msgs) < 2 {
		t.Fatalf("messages = %v", r.body["messages"])
	}
	first, _ := msgs[0].(map[string]any)
	second, _ := msgs[1].(map[string]any)
	if first["role"] != "system" || !strings.Contains(fmt.Sprint(first["content"]), "from servers.<server> import <function>") {
		t.Errorf("first message is not the system prompt: %v", first)
	}
	if second["role"] != "user" {
		t.Errorf("second message role = %v", second["role"])
	}
}

func TestOpenAIProtocolServer_FencedCode(t *testing.T) {
	srv := newProtocolServer(t, openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, nil))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != goodProgram {
		t.Fatalf("code = %q, want %q (diags %s)", resp.Code, goodProgram, diagText(resp.Diagnostics))
	}
	if resp.Usage.PromptTokens != 321 || resp.Usage.CompletionTokens != 45 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Model != "served-model-2026-01-01" {
		t.Errorf("model = %q, want the one the server reports", resp.Model)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	checkChatShape(t, r, "gpt-4o-mini")
	if r.body["max_tokens"] != 2000.0 || r.body["max_completion_tokens"] != nil {
		t.Errorf("max_tokens = %v, max_completion_tokens = %v; want 2000 and absent", r.body["max_tokens"], r.body["max_completion_tokens"])
	}
	if temp, ok := r.body["temperature"].(float64); !ok || temp < 0.19 || temp > 0.21 {
		t.Errorf("temperature = %v, want 0.2", r.body["temperature"])
	}
	user := fmt.Sprint(r.body["messages"].([]any)[1].(map[string]any)["content"])
	for _, want := range []string{"How many lines does notes/todo.txt have?", "from servers.filesystem import read_text_file", "def read_text_file(", "notes/todo.txt", "report.csv"} {
		if !strings.Contains(user, want) {
			t.Errorf("user prompt lacks %q:\n%s", want, user)
		}
	}
}

func TestOpenAIProtocolServer_RateLimitThenSuccess(t *testing.T) {
	srv := newProtocolServer(t,
		openAIError(http.StatusTooManyRequests, "Rate limit reached for requests", "", "rate_limit_exceeded", map[string]string{"Retry-After": "2"}),
		openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, nil))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != goodProgram {
		t.Fatalf("no code after a 429: %s", diagText(resp.Diagnostics))
	}
	if n := len(srv.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	if w := h.waits(); len(w) != 1 || w[0] != 2*time.Second {
		t.Fatalf("waits = %v, want [2s] from Retry-After", w)
	}
	if !strings.Contains(h.logs.String(), "retrying model request") {
		t.Errorf("the retry was not logged:\n%s", h.logs.String())
	}
}

func TestOpenAIProtocolServer_ServerErrorThenSuccess(t *testing.T) {
	srv := newProtocolServer(t,
		openAIError(http.StatusInternalServerError, "The server had an error while processing your request.", "", "", nil),
		openAIError(http.StatusBadGateway, "bad gateway", "", "", nil),
		openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, nil))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != goodProgram {
		t.Fatalf("no code after 5xx: %s", diagText(resp.Diagnostics))
	}
	w := h.waits()
	if len(w) != 2 {
		t.Fatalf("waits = %v, want two backoffs", w)
	}
	// Exponential with jitter in the upper half: [250ms, 500ms], then [500ms, 1s].
	if w[0] < baseBackoff/2 || w[0] > baseBackoff || w[1] < baseBackoff || w[1] > 2*baseBackoff {
		t.Errorf("backoffs %v outside [%v,%v] and [%v,%v]", w, baseBackoff/2, baseBackoff, baseBackoff, 2*baseBackoff)
	}
}

func TestOpenAIProtocolServer_RetriesRunOut(t *testing.T) {
	srv := newProtocolServer(t, openAIError(http.StatusServiceUnavailable, "overloaded", "", "", nil))
	h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"max_retries": 2}))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != "" || !resp.Diagnostics.HasErrors() {
		t.Fatalf("want a code-less response with an error, got %q %s", resp.Code, diagText(resp.Diagnostics))
	}
	if n := len(srv.requests()); n != 3 {
		t.Fatalf("%d requests, want 1 + max_retries = 3", n)
	}
	if d := diagText(resp.Diagnostics); !strings.Contains(d, "openai request failed") || !strings.Contains(d, "after 3 attempts") {
		t.Errorf("diagnostic = %s", d)
	}
}

func TestOpenAIProtocolServer_MaxTokensRefusedThenMaxCompletionTokens(t *testing.T) {
	var shapes []string
	reply := openAIReply(fencedReply(goodProgram))
	srv := newProtocolServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		_, mt := body["max_tokens"]
		_, mct := body["max_completion_tokens"]
		shapes = append(shapes, fmt.Sprintf("max_tokens=%v max_completion_tokens=%v", mt, mct))
		if mt {
			// OpenAI's exact answer to max_tokens on a reasoning model.
			openAIError(http.StatusBadRequest,
				"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
				"max_tokens", "unsupported_parameter", nil)(w, r)
			return
		}
		reply(w, r)
	})
	// A name no rule knows, so only the server's error can teach the plugin.
	h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"model": "acme-reasoner-2", "temperature": nil}))
	for i := range 2 {
		resp := h.generate(t, sampleRequest(t))
		if resp.Code != goodProgram {
			t.Fatalf("generate %d: no code: %s", i, diagText(resp.Diagnostics))
		}
	}
	want := []string{
		"max_tokens=true max_completion_tokens=false",
		"max_tokens=false max_completion_tokens=true",
		// Remembered for the model: the second task asks right at once.
		"max_tokens=false max_completion_tokens=true",
	}
	if strings.Join(shapes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("request shapes:\n%s\nwant:\n%s", strings.Join(shapes, "\n"), strings.Join(want, "\n"))
	}
	if len(h.waits()) != 0 {
		t.Errorf("adapting to a 400 must not back off: waits %v", h.waits())
	}
	if max := srv.requests()[1].body["max_completion_tokens"]; max != 2000.0 {
		t.Errorf("max_completion_tokens = %v, want 2000", max)
	}
}

func TestOpenAIProtocolServer_TemperatureRefusedThenOmitted(t *testing.T) {
	srv := newProtocolServer(t,
		openAIError(http.StatusBadRequest,
			"Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.",
			"temperature", "unsupported_value", nil),
		openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"model": "acme-thinker"}))
	for range 2 {
		if resp := h.generate(t, sampleRequest(t)); resp.Code != goodProgram {
			t.Fatalf("no code: %s", diagText(resp.Diagnostics))
		}
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, want := range []bool{true, false, false} {
		if _, has := reqs[i].body["temperature"]; has != want {
			t.Errorf("request %d: temperature present = %v, want %v", i, has, want)
		}
	}
}

func TestOpenAIProtocolServer_ReasoningModelByName(t *testing.T) {
	srv := newProtocolServer(t, openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"model": "o3-mini"}))
	if resp := h.generate(t, sampleRequest(t)); resp.Code != goodProgram {
		t.Fatalf("no code: %s", diagText(resp.Diagnostics))
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1: the name alone must pick the right shape", len(reqs))
	}
	b := reqs[0].body
	if _, has := b["temperature"]; has {
		t.Error("temperature sent to a reasoning model")
	}
	if b["max_completion_tokens"] != 2000.0 || b["max_tokens"] != nil {
		t.Errorf("max_completion_tokens = %v, max_tokens = %v", b["max_completion_tokens"], b["max_tokens"])
	}
}

func TestOpenAIProtocolServer_Streaming(t *testing.T) {
	srv := newProtocolServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		text := fencedReply(goodProgram)
		chunk := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		for i := 0; i < len(text); i += 7 {
			chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "streamed-model",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text[i:min(i+7, len(text))]}}}})
		}
		chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "streamed-model",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
		chunk(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "streamed-model", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"stream": true}))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != goodProgram {
		t.Fatalf("streamed code = %q (%s)", resp.Code, diagText(resp.Diagnostics))
	}
	if resp.Usage.PromptTokens != 100 || resp.Usage.CompletionTokens != 20 || resp.Model != "streamed-model" {
		t.Errorf("usage %+v model %q", resp.Usage, resp.Model)
	}
	b := srv.requests()[0].body
	opts, _ := b["stream_options"].(map[string]any)
	if b["stream"] != true || opts["include_usage"] != true {
		t.Errorf("stream = %v, stream_options = %v", b["stream"], b["stream_options"])
	}
}

func TestOpenAIProtocolServer_MalformedReply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id": "x", "choices": [ {"message": `)
		}, "openai request failed: the reply is not valid JSON"},
		{"HTML page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body>Welcome to the proxy</body></html>`)
		}, "the reply is not valid JSON"},
		{"no choices", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"id": "x", "model": "m", "choices": []any{}})
		}, "no choices"},
		{"prose only", openAIReply("I am sorry, I cannot help with that."), "holds no program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newProtocolServer(t, tc.handler)
			h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"compile_repairs": 0}))
			resp := h.generate(t, sampleRequest(t))
			if resp.Code != "" || !strings.Contains(diagText(resp.Diagnostics), tc.want) {
				t.Fatalf("code %q, diagnostics %s; want none and %q", resp.Code, diagText(resp.Diagnostics), tc.want)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests; a malformed reply is not retried", n)
			}
		})
	}
}

func TestOpenAIProtocolServer_SyntaxErrorRepairedInConversation(t *testing.T) {
	broken := "from servers.filesystem import read_text_file\nprint(len(read_text_file(path=\"notes/todo.txt\")[\"content\"].splitlines())\n"
	srv := newProtocolServer(t, openAIReply(fencedReply(broken)), openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, nil))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != goodProgram {
		t.Fatalf("code = %q (%s)", resp.Code, diagText(resp.Diagnostics))
	}
	if resp.Usage.PromptTokens != 642 || resp.Usage.CompletionTokens != 90 {
		t.Errorf("usage %+v, want both rounds summed", resp.Usage)
	}
	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	msgs := reqs[1].body["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("repair turn has %d messages, want system, user, assistant, user", len(msgs))
	}
	last := fmt.Sprint(msgs[3].(map[string]any)["content"])
	if msgs[2].(map[string]any)["role"] != "assistant" || !strings.Contains(last, "SyntaxError") || !strings.Contains(last, "never closed") {
		t.Errorf("repair turn does not carry Python's error:\n%s", last)
	}
}

func TestOpenAIProtocolServer_SyntaxErrorReturnedWithoutRepairs(t *testing.T) {
	srv := newProtocolServer(t, openAIReply(fencedReply("def f(:\n    pass\n")))
	h := newHarness(t, openAIConfig(srv.srv.URL, map[string]any{"compile_repairs": 0}))
	resp := h.generate(t, sampleRequest(t))
	if resp.Code != "" {
		t.Fatalf("code that does not compile was returned: %q", resp.Code)
	}
	d := diagText(resp.Diagnostics)
	if !strings.Contains(d, "does not compile") || !strings.Contains(d, "SyntaxError") || !strings.Contains(d, "line 1") {
		t.Errorf("diagnostic = %s", d)
	}
	if resp.Usage.PromptTokens != 321 {
		t.Errorf("tokens spent on the failed reply are not reported: %+v", resp.Usage)
	}
}

func TestOpenAIProtocolServer_KeyEchoedByServerIsRedacted(t *testing.T) {
	srv := newProtocolServer(t, openAIError(http.StatusUnauthorized,
		"Incorrect API key provided: "+testKey+". You can find your API key at https://platform.openai.com/account/api-keys.",
		"", "invalid_api_key", nil))
	h := newHarness(t, openAIConfig(srv.srv.URL, nil))
	resp := h.generate(t, sampleRequest(t))
	d := diagText(resp.Diagnostics)
	if !strings.Contains(d, "(sensitive)") || !strings.Contains(d, "check api_key") {
		t.Errorf("diagnostic = %s; want the key masked and a hint", d)
	}
	if !strings.Contains(h.logs.String(), "model request failed") {
		t.Errorf("the failure was not logged:\n%s", h.logs.String())
	}
	// newHarness's cleanup asserts the key is absent from the log.
}

func TestAzureOpenAIProtocolServer_DeploymentPathAndKeyHeader(t *testing.T) {
	srv := newProtocolServer(t, openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, map[string]any{
		"provider": "azure_openai", "model": "gpt-4o", "deployment": "prod-gpt4o",
		"base_url": srv.srv.URL, "api_key": testKey, "api_version": "2024-10-21",
	})
	if resp := h.generate(t, sampleRequest(t)); resp.Code != goodProgram {
		t.Fatalf("no code: %s", diagText(resp.Diagnostics))
	}
	r := srv.requests()[0]
	if r.path != "/openai/deployments/prod-gpt4o/chat/completions" || r.query != "api-version=2024-10-21" {
		t.Errorf("request to %s?%s", r.path, r.query)
	}
	if r.header.Get("api-key") != testKey || r.header.Get("Authorization") != "" {
		t.Errorf("api-key = %q, Authorization = %q", r.header.Get("api-key"), r.header.Get("Authorization"))
	}
}

func TestOpenAICompatibleProtocolServer_NoKey(t *testing.T) {
	srv := newProtocolServer(t, openAIReply(goodProgram))
	h := newHarness(t, map[string]any{"provider": "openai_compatible", "model": "qwen2.5-coder:7b", "base_url": srv.srv.URL + "/v1"})
	if resp := h.generate(t, sampleRequest(t)); resp.Code != goodProgram {
		t.Fatalf("unfenced reply not taken as code: %s", diagText(resp.Diagnostics))
	}
	r := srv.requests()[0]
	if r.header.Get("Authorization") != "" {
		t.Errorf("Authorization sent without a key: %q", r.header.Get("Authorization"))
	}
	if _, has := r.body["temperature"]; has {
		t.Error("temperature sent although not configured")
	}
}

func TestOpenAIProtocolServer_RepairRequestCarriesPreviousAttempt(t *testing.T) {
	srv := newProtocolServer(t, openAIReply(fencedReply(goodProgram)))
	h := newHarness(t, openAIConfig(srv.srv.URL, nil))
	req := sampleRequest(t)
	req.Previous = &codegen.Attempt{Code: "print(open('nope').read())\n", Error: "Traceback (most recent call last):\n  File \"<main>\", line 1\nFileNotFoundError: [Errno 2] No such file or directory: 'nope'"}
	if resp := h.generate(t, req); resp.Code != goodProgram {
		t.Fatalf("no code: %s", diagText(resp.Diagnostics))
	}
	user := fmt.Sprint(srv.requests()[0].body["messages"].([]any)[1].(map[string]any)["content"])
	for _, want := range []string{"previous program failed", "print(open('nope').read())", "FileNotFoundError"} {
		if !strings.Contains(user, want) {
			t.Errorf("repair prompt lacks %q", want)
		}
	}
}
