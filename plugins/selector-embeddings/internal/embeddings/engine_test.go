package embeddings

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/selector"
)

func testLogger() (hclog.Logger, *testutil.Buffer) {
	buf := &testutil.Buffer{}
	return hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Debug, JSONFormat: true}), buf
}

var catalogue = []selector.Document{
	doc("rentals", "book_car", "Book a car for pickup at a branch.", `{"properties":{"branch":{"description":"Pickup branch"}}}`),
	doc("rentals", "cancel_booking", "Cancel a booking by its reference.", `{"properties":{"reference":{}}}`),
	doc("meteo", "get_weather", "Current weather for a city.", `{"properties":{"city":{}}}`),
	doc("fs", "write_file", "Write content to a file.", `{"properties":{"path":{},"content":{}}}`),
	doc("fs", "read_file", "Read a file.", `{"properties":{"path":{}}}`),
}

func doc(server, name, desc, schema string) selector.Document {
	return selector.Document{
		ID: server + "/" + name, Kind: "tool", Server: server, Name: name, Description: desc,
		InputSchema: json.RawMessage(schema), ContentHash: fmt.Sprintf("%x", []byte(server+name+desc+schema)),
	}
}

func configure(t *testing.T, e *Engine, cfg string) {
	t.Helper()
	diags, err := e.Configure(context.Background(), json.RawMessage(cfg), selector.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("configure %s: %v %v", cfg, err, diags)
	}
	t.Cleanup(e.Close)
}

func index(t *testing.T, s selector.Selector, req selector.IndexRequest) {
	t.Helper()
	resp, err := s.Index(context.Background(), req)
	if err != nil || resp.Diagnostics.HasErrors() {
		t.Fatalf("index: %v %v", err, resp.Diagnostics)
	}
}

func search(t *testing.T, s selector.Selector, req selector.SearchRequest) selector.SearchResponse {
	t.Helper()
	resp, err := s.Search(context.Background(), req)
	if err != nil {
		t.Fatalf("search %q: %v", req.Query, err)
	}
	return resp
}

func hitIDs(r selector.SearchResponse) []string {
	var out []string
	for _, h := range r.Hits {
		out = append(out, h.ID)
	}
	return out
}

func embeddingsConfig(url, cacheDir string, extra string) string {
	return fmt.Sprintf(`{"embeddings":{"base_url":%q,"model":"fake-embed","api_key":"sk-test-secret","batch_size":2,"cache_dir":%q%s}}`,
		url+"/v1", cacheDir, extra)
}

func waitIndexed(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProtocolLevelOpenAIServerFusionBatchingAndCache runs the embeddings
// path against a protocol-level OpenAI-compatible embeddings server inside
// the test (real HTTP, deterministic vectors): documents go out in batches
// of batch_size with the API key, fusion finds a tool BM25 alone cannot, and
// a restarted engine reads every unchanged vector from the disk cache.
func TestProtocolLevelOpenAIServerFusionBatchingAndCache(t *testing.T) {
	srv := newFakeOpenAIServer(t)
	cache := t.TempDir()
	log, logs := testLogger()

	e := New(log)
	configure(t, e, embeddingsConfig(srv.URL, cache, ""))
	index(t, e, selector.IndexRequest{Upserts: catalogue})
	waitIndexed(t, e)
	reqs, inputs := srv.stats()
	if reqs != 3 || inputs != len(catalogue) {
		t.Fatalf("5 documents with batch_size 2: %d requests, %d inputs; want 3, 5", reqs, inputs)
	}
	srv.mu.Lock()
	for _, a := range srv.auth {
		if a != "Bearer sk-test-secret" {
			t.Errorf("Authorization header %q", a)
		}
	}
	for _, in := range srv.inputs {
		if len(in) > 2 {
			t.Errorf("batch of %d inputs exceeds batch_size 2", len(in))
		}
	}
	srv.mu.Unlock()

	// "automobile hire" shares no word with any tool: BM25 finds nothing,
	// the vectors (car ~ automobile, rental ~ hire) find the car tool.
	offline := New(nil)
	index(t, offline, selector.IndexRequest{Upserts: catalogue})
	if got := hitIDs(search(t, offline, selector.SearchRequest{Query: "automobile hire", Limit: 3})); len(got) != 0 {
		t.Fatalf("BM25 alone should find nothing, got %v", got)
	}
	resp := search(t, e, selector.SearchRequest{Query: "automobile hire", Limit: 3})
	if got := hitIDs(resp); len(got) == 0 || got[0] != "rentals/book_car" || len(resp.Diagnostics) != 0 {
		t.Fatalf("fused search: %v %v", got, resp.Diagnostics)
	}
	// Filters apply to the embedding ranking too.
	if got := hitIDs(search(t, e, selector.SearchRequest{Query: "automobile hire", Limit: 3, Servers: []string{"meteo"}})); slices.Contains(got, "rentals/book_car") {
		t.Fatalf("server filter ignored by the embedding ranking: %v", got)
	}
	e.Close()

	// Restart: same model, same texts, so no document is embedded again.
	reqsBefore, inputsBefore := srv.stats()
	e2 := New(log)
	configure(t, e2, embeddingsConfig(srv.URL, cache, ""))
	index(t, e2, selector.IndexRequest{Upserts: catalogue})
	waitIndexed(t, e2)
	if reqs, inputs := srv.stats(); reqs != reqsBefore || inputs != inputsBefore {
		t.Fatalf("restart re-embedded documents: %d→%d requests, %d→%d inputs", reqsBefore, reqs, inputsBefore, inputs)
	}
	if got := hitIDs(search(t, e2, selector.SearchRequest{Query: "automobile hire", Limit: 3})); len(got) == 0 || got[0] != "rentals/book_car" {
		t.Fatalf("after restart: %v", got)
	}
	// A changed tool is embedded again, alone.
	changed := catalogue[2]
	changed.Description, changed.ContentHash = "Weather forecast for a city, hourly.", "new"
	_, inputsBefore = srv.stats()
	index(t, e2, selector.IndexRequest{Upserts: []selector.Document{changed}})
	waitIndexed(t, e2)
	if _, inputs := srv.stats(); inputs != inputsBefore+1 {
		t.Fatalf("changed tool: %d inputs embedded, want 1", inputs-inputsBefore)
	}
	if strings.Contains(logs.String(), "sk-test-secret") {
		t.Fatal("the API key reached the log")
	}
}

// TestProtocolLevelOpenAIServerBackoffOn429 checks, against a
// protocol-level OpenAI-compatible embeddings server inside the test, that
// rate-limited document batches are retried with backoff until they succeed.
func TestProtocolLevelOpenAIServerBackoffOn429(t *testing.T) {
	srv := newFakeOpenAIServer(t)
	srv.set(func(f *fakeOpenAIServer) { f.fail429 = 3 })
	log, logs := testLogger()
	e := New(log)
	e.retryBase = time.Millisecond
	configure(t, e, embeddingsConfig(srv.URL, "", `,"batch_size":10`))
	index(t, e, selector.IndexRequest{Upserts: catalogue})
	waitIndexed(t, e)
	reqs, inputs := srv.stats()
	if reqs != 4 || inputs != len(catalogue) {
		t.Fatalf("3×429 then success: %d requests, %d inputs embedded; want 4, %d", reqs, inputs, len(catalogue))
	}
	if !strings.Contains(logs.String(), "backing off") {
		t.Fatalf("no backoff logged:\n%s", logs)
	}
}

// TestProtocolLevelOpenAIServerFallbackOn500 checks, against a
// protocol-level OpenAI-compatible embeddings server inside the test, that a
// failing endpoint degrades search to BM25 with a logged warning, and that
// documents indexed meanwhile are still found lexically.
func TestProtocolLevelOpenAIServerFallbackOn500(t *testing.T) {
	srv := newFakeOpenAIServer(t)
	log, logs := testLogger()
	e := New(log)
	e.retryBase = time.Millisecond
	configure(t, e, embeddingsConfig(srv.URL, "", `,"max_retries":1`))
	index(t, e, selector.IndexRequest{Upserts: catalogue})
	waitIndexed(t, e)

	srv.set(func(f *fakeOpenAIServer) { f.fail500 = true })
	extra := doc("meteo", "get_forecast", "Weather forecast for the next days.", `{}`)
	index(t, e, selector.IndexRequest{Upserts: []selector.Document{extra}})

	offline := New(nil)
	index(t, offline, selector.IndexRequest{Upserts: append(slices.Clone(catalogue), extra)})
	req := selector.SearchRequest{Query: "weather forecast", Limit: 5}
	want := hitIDs(search(t, offline, req))
	resp := search(t, e, req)
	if got := hitIDs(resp); !slices.Equal(got, want) {
		t.Fatalf("fallback ranking %v, want the BM25 ranking %v", got, want)
	}
	if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Severity != pluginapi.SeverityWarning {
		t.Fatalf("want one warning diagnostic, got %v", resp.Diagnostics)
	}
	eventually(t, func() bool { return strings.Contains(logs.String(), "embedding documents failed") })
	if l := logs.String(); !strings.Contains(l, "searching with BM25 only") {
		t.Fatalf("fallback warning not logged:\n%s", l)
	}
}

// TestProtocolLevelOpenAIServerFallbackWhenSlow checks, against a
// protocol-level OpenAI-compatible embeddings server inside the test, that a
// query embedding slower than latency_budget_ms is abandoned for BM25.
func TestProtocolLevelOpenAIServerFallbackWhenSlow(t *testing.T) {
	srv := newFakeOpenAIServer(t)
	log, logs := testLogger()
	e := New(log)
	configure(t, e, embeddingsConfig(srv.URL, "", `,"latency_budget_ms":50`))
	index(t, e, selector.IndexRequest{Upserts: catalogue})
	waitIndexed(t, e)

	srv.set(func(f *fakeOpenAIServer) { f.delay = 10 * time.Second })
	resp := search(t, e, selector.SearchRequest{Query: "read a file", Limit: 2})
	if got := hitIDs(resp); len(got) == 0 || got[0] != "fs/read_file" {
		t.Fatalf("fallback hits %v", got)
	}
	if len(resp.Diagnostics) != 1 || !strings.Contains(resp.Diagnostics[0].Detail, "deadline") {
		t.Fatalf("want a deadline warning, got %v", resp.Diagnostics)
	}
	if !strings.Contains(logs.String(), "exceeded the latency budget") {
		t.Fatalf("no warning logged:\n%s", logs)
	}
	// A duration crosses go-plugin's JSON as a number; cexecd showed 5e+07.
	if !strings.Contains(logs.String(), `"latency_budget":"50ms"`) {
		t.Errorf("latency budget not logged as a duration:\n%s", logs)
	}
}

func TestFuse(t *testing.T) {
	lex := []rankerHit{{"a", 9}, {"b", 5}}
	emb := []rankerHit{{"c", 0.9}, {"a", 0.8}}
	got := fuse(toRanker(lex), toRanker(emb), 0.5, 10)
	// a: 0.5/61 + 0.5/62; c: 0.5/61; b: 0.5/62.
	want := []rankerHit{{"a", 0.5/61 + 0.5/62}, {"c", 0.5 / 61}, {"b", 0.5 / 62}}
	if len(got) != len(want) {
		t.Fatalf("fuse = %v", got)
	}
	for i := range want {
		if got[i].ID != want[i].id || abs(got[i].Score-want[i].score) > 1e-12 {
			t.Fatalf("fuse[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got := fuse(toRanker(lex), toRanker(emb), 0, 10); len(got) != 2 || got[0].ID != "a" {
		t.Fatalf("weight 0 must keep the lexical ranking only: %v", got)
	}
}

func TestConfigureDiagnostics(t *testing.T) {
	tests := []struct {
		name, cfg, attr string
	}{
		{"k1 not positive", `{"k1":0}`, "k1"},
		{"b out of range", `{"b":1.5}`, "b"},
		{"negative field weight", `{"field_weights":{"name":-1}}`, "field_weights.name"},
		{"all field weights zero", `{"field_weights":{"name":0,"server":0,"summary":0,"description":0,"param_names":0,"param_descriptions":0}}`, "field_weights"},
		{"unknown preset", `{"preset":"fancy"}`, "preset"},
		{"expansion weight", `{"expansion_weight":3}`, "expansion_weight"},
		{"one-word synonym group", `{"synonyms":[["a","b"],["c"]]}`, "synonyms[1]"},
		{"wrong type", `{"k1":"high"}`, "k1"},
		{"unknown attribute", `{"k3":1}`, "k3"},
		{"embeddings without model", `{"embeddings":{"base_url":"http://localhost:1/v1"}}`, "embeddings.model"},
		{"embeddings bad url", `{"embeddings":{"base_url":"localhost:11434","model":"m"}}`, "embeddings.base_url"},
		{"batch size", `{"embeddings":{"base_url":"http://h/v1","model":"m","batch_size":0}}`, "embeddings.batch_size"},
		{"fusion weight", `{"embeddings":{"base_url":"http://h/v1","model":"m","fusion_weight":1.5}}`, "embeddings.fusion_weight"},
		{"relative cache dir", `{"embeddings":{"base_url":"http://h/v1","model":"m","cache_dir":"cache"}}`, "embeddings.cache_dir"},
		{"latency budget", `{"embeddings":{"base_url":"http://h/v1","model":"m","latency_budget_ms":-5}}`, "embeddings.latency_budget_ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags, err := New(nil).Configure(context.Background(), json.RawMessage(tt.cfg), selector.APIVersion)
			if err != nil {
				t.Fatal(err)
			}
			if !diags.HasErrors() {
				t.Fatalf("%s accepted", tt.cfg)
			}
			found := false
			for _, d := range diags {
				found = found || d.Attribute == tt.attr
			}
			if !found {
				t.Fatalf("no diagnostic for attribute %q: %+v", tt.attr, diags)
			}
		})
	}
	for _, ok := range []string{``, `{}`, `null`, `{"preset":"plain_bm25","k1":0.9}`, `{"synonyms":[],"path_terms":[]}`,
		`{"field_weights":{"summary":1},"stemming":false}`} {
		e := New(nil)
		if diags, err := e.Configure(context.Background(), json.RawMessage(ok), selector.APIVersion); err != nil || diags.HasErrors() {
			t.Errorf("%s rejected: %v %v", ok, err, diags)
		}
	}
	for _, v := range []string{"v9", ""} {
		if diags, _ := New(nil).Configure(context.Background(), nil, v); !diags.HasErrors() {
			t.Errorf("API version %q accepted", v)
		}
	}
}

func TestPresetPlainDiffersFromDefault(t *testing.T) {
	plain := New(nil)
	configure(t, plain, `{"preset":"plain_bm25"}`)
	def := New(nil)
	configure(t, def, `{}`)
	cat := []selector.Document{doc("git", "gitCommitChanges", "Record staged work.", `{}`), catalogue[0]}
	for _, e := range []*Engine{plain, def} {
		index(t, e, selector.IndexRequest{Upserts: cat})
	}
	// Only identifier splitting finds "commit" inside gitCommitChanges.
	q := selector.SearchRequest{Query: "commit", Limit: 3}
	if got := hitIDs(search(t, plain, q)); len(got) != 0 {
		t.Fatalf("plain BM25 split identifiers: %v", got)
	}
	if got := hitIDs(search(t, def, q)); len(got) != 1 || got[0] != "git/gitCommitChanges" {
		t.Fatalf("default should match gitCommitChanges by its name: %v", got)
	}
}

// TestOverGRPC drives the plugin through real gRPC, as cexecd does.
func TestOverGRPC(t *testing.T) {
	impl := New(nil)
	plugintest.CheckInfo(t, impl, pluginapi.KindSelector)
	c := plugintest.Selector(t, impl)
	if diags, err := c.Configure(context.Background(), json.RawMessage(`{"k1":1.4}`), selector.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", err, diags)
	}
	diags, err := c.Configure(context.Background(), json.RawMessage(`{"embeddings":{"base_url":"ftp://x","model":""}}`), selector.APIVersion)
	if err != nil || len(diags) != 2 || diags[0].Attribute != "embeddings.base_url" || diags[1].Attribute != "embeddings.model" {
		t.Fatalf("diagnostics over gRPC: %v %+v", err, diags)
	}
	resp, err := c.Index(context.Background(), selector.IndexRequest{Upserts: catalogue})
	if err != nil || resp.Documents != int64(len(catalogue)) {
		t.Fatalf("index: %v %+v", err, resp)
	}
	if got := hitIDs(search(t, c, selector.SearchRequest{Query: "read file", Limit: 2})); len(got) != 2 || got[0] != "fs/read_file" {
		t.Fatalf("search over gRPC: %v", got)
	}
	if got := hitIDs(search(t, c, selector.SearchRequest{Query: "file", Limit: 5, Servers: []string{"rentals"}})); len(got) != 0 {
		t.Fatalf("server filter over gRPC: %v", got)
	}
	resp, err = c.Index(context.Background(), selector.IndexRequest{Deletes: []string{"fs/read_file"}})
	if err != nil || resp.Documents != int64(len(catalogue)-1) {
		t.Fatalf("delete: %v %+v", err, resp)
	}
	resp, err = c.Index(context.Background(), selector.IndexRequest{Reset: true, Upserts: catalogue[:1]})
	if err != nil || resp.Documents != 1 {
		t.Fatalf("reset: %v %+v", err, resp)
	}
}

func TestIndexSkipsDocumentsWithoutID(t *testing.T) {
	e := New(nil)
	bad := catalogue[0]
	bad.ID = ""
	resp, err := e.Index(context.Background(), selector.IndexRequest{Upserts: []selector.Document{bad, catalogue[1]}})
	if err != nil || resp.Documents != 1 || len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Severity != pluginapi.SeverityWarning {
		t.Fatalf("index: %v %+v", err, resp)
	}
	if got := hitIDs(search(t, e, selector.SearchRequest{Query: "   ", Limit: 3})); len(got) != 0 {
		t.Fatalf("blank query returned %v", got)
	}
}

// TestAPIKeyEchoedByServerIsMasked checks, against a protocol-level
// OpenAI-compatible server that quotes the Authorization header in its 401
// error (as OpenAI and several gateways do), that the key reaches neither
// the plugin's log nor the search diagnostics, which go back to cexecd.
func TestAPIKeyEchoedByServerIsMasked(t *testing.T) {
	srv := newFakeOpenAIServer(t)
	srv.set(func(f *fakeOpenAIServer) { f.echo401 = true })
	log, logs := testLogger()
	e := New(log)
	e.retryBase = time.Millisecond
	configure(t, e, embeddingsConfig(srv.URL, "", `,"max_retries":0`))
	index(t, e, selector.IndexRequest{Upserts: catalogue})
	resp := search(t, e, selector.SearchRequest{Query: "weather forecast", Limit: 5})
	eventually(t, func() bool { return strings.Contains(logs.String(), "401") })
	const key = "sk-test-secret"
	if l := logs.String(); strings.Contains(l, key) {
		t.Errorf("api_key in the plugin's log:\n%s", l)
	}
	for _, d := range resp.Diagnostics {
		if strings.Contains(d.Summary+d.Detail, key) {
			t.Errorf("api_key in a search diagnostic: %+v", d)
		}
	}
}
