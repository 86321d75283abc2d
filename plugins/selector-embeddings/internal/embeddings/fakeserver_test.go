package embeddings

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// fakeOpenAIServer is a protocol-level OpenAI-compatible embeddings server:
// real HTTP, the real POST /v1/embeddings request and response JSON, and
// deterministic vectors. Words of one concept (car, automobile, vehicle…)
// share a dimension, so it can show that fusion finds documents BM25 cannot;
// every other word hashes into the remaining dimensions.
type fakeOpenAIServer struct {
	*httptest.Server

	mu       sync.Mutex
	requests int        // embeddings requests answered, any status
	inputs   [][]string // inputs of successful requests
	auth     []string   // Authorization headers seen
	fail429  int        // answer this many next requests with 429
	fail500  bool       // answer every request with 500
	echo401  bool       // answer every request with 401 quoting the Authorization header, as some gateways do
	delay    time.Duration
}

const fakeDims = 32

var fakeConcepts = map[string]int{
	"car": 0, "automobile": 0, "vehicle": 0, "rental": 1, "hire": 1, "rent": 1,
	"weather": 2, "forecast": 2, "climate": 2,
}

func fakeVector(text string) []float32 {
	v := make([]float32, fakeDims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if c, ok := fakeConcepts[w]; ok {
			v[c] += 1
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[8+h.Sum32()%(fakeDims-8)] += 0.2
	}
	v[fakeDims-1] += 0.01 // never the zero vector
	return v
}

func newFakeOpenAIServer(t *testing.T) *fakeOpenAIServer {
	f := &fakeOpenAIServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", f.embeddings)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAIServer) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input any    `json:"input"`
		Model string `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	var inputs []string
	switch in := req.Input.(type) {
	case string:
		inputs = []string{in}
	case []any:
		for _, x := range in {
			s, _ := x.(string)
			inputs = append(inputs, s)
		}
	}
	f.mu.Lock()
	f.requests++
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	delay, fail500, echo401 := f.delay, f.fail500, f.echo401
	fail429 := f.fail429 > 0
	if fail429 {
		f.fail429--
	}
	f.mu.Unlock()

	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case echo401:
		w.WriteHeader(http.StatusUnauthorized)
		msg, _ := json.Marshal("Incorrect API key provided: " + r.Header.Get("Authorization"))
		w.Write([]byte(`{"error":{"message":` + string(msg) + `,"type":"invalid_request_error","code":"invalid_api_key"}}`))
		return
	case fail500:
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":{"message":"upstream exploded","type":"server_error"}}`))
		return
	case fail429:
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"message":"rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	resp := struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Model  string         `json:"model"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": len(inputs), "total_tokens": len(inputs)}}
	// Answer in reverse order: clients must place vectors by index.
	for i := len(inputs) - 1; i >= 0; i-- {
		resp.Data = append(resp.Data, item{Object: "embedding", Index: i, Embedding: fakeVector(inputs[i])})
	}
	f.mu.Lock()
	f.inputs = append(f.inputs, inputs)
	f.mu.Unlock()
	json.NewEncoder(w).Encode(resp)
}

func (f *fakeOpenAIServer) set(fn func(f *fakeOpenAIServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// stats returns the number of requests and of embedded inputs so far.
func (f *fakeOpenAIServer) stats() (requests, inputs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.inputs {
		inputs += len(in)
	}
	return f.requests, inputs
}
