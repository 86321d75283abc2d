package embeddings

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// embedder turns texts into vectors, one per text, in order.
type embedder interface {
	embed(ctx context.Context, texts []string) ([][]float32, error)
}

// openaiEmbedder calls an OpenAI-compatible POST {base_url}/embeddings.
type openaiEmbedder struct {
	client *openai.Client
	model  string
	dims   int
	// apiKey is masked in errors: servers and gateways quote the
	// Authorization header in 401 messages, and errors reach the log and
	// the search diagnostics that cexecd receives.
	apiKey string
}

func newOpenAIEmbedder(s *embSettings) *openaiEmbedder {
	cfg := openai.DefaultConfig(s.apiKey)
	cfg.BaseURL = s.baseURL
	cfg.HTTPClient = &http.Client{Transport: retryAfterTransport{base: http.DefaultTransport}}
	return &openaiEmbedder{client: openai.NewClientWithConfig(cfg), model: s.model, dims: s.dimensions, apiKey: s.apiKey}
}

func (e *openaiEmbedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	resp, err := e.client.CreateEmbeddings(ctx, openai.EmbeddingRequest{
		Input:      texts,
		Model:      openai.EmbeddingModel(e.model),
		Dimensions: e.dims,
	})
	if err != nil {
		return nil, maskKey(fmt.Errorf("embeddings request: %w", err), e.apiKey)
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings request: %d vectors for %d inputs", len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil || len(d.Embedding) == 0 {
			return nil, fmt.Errorf("embeddings request: bad or duplicate vector index %d", d.Index)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// maskedError is err with a secret replaced in its text; Unwrap keeps the
// chain, so statusCode and retryable still see the API error.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// maskKey replaces key in err's text with "(sensitive)". Keys shorter than
// four bytes are not real keys and masking them would garble the message.
func maskKey(err error, key string) error {
	if len(key) < 4 || !strings.Contains(err.Error(), key) {
		return err
	}
	return &maskedError{msg: strings.ReplaceAll(err.Error(), key, "(sensitive)"), err: err}
}

// statusCode returns the HTTP status of a failed embeddings request, or 0.
func statusCode(err error) int {
	var api *openai.APIError
	if errors.As(err, &api) {
		return api.HTTPStatusCode
	}
	var req *openai.RequestError
	if errors.As(err, &req) {
		return req.HTTPStatusCode
	}
	return 0
}

// retryable reports whether a document batch should be retried after err:
// rate limiting (429), server errors (5xx) and network failures are
// transient; anything else (bad model, bad key) is not.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	code := statusCode(err)
	if code == http.StatusTooManyRequests || code >= 500 {
		return true
	}
	var ne net.Error
	return code == 0 && errors.As(err, &ne)
}

// backoff is the wait before retry attempt n (0-based): exponential from
// base, capped at limit, with full jitter so many clients that were limited
// together do not retry together; never shorter than the server's
// Retry-After.
func backoff(n int, base, limit, retryAfter time.Duration) time.Duration {
	d := base << min(n, 20)
	if d <= 0 || d > limit {
		d = limit
	}
	d = d/2 + rand.N(d/2+1)
	return max(d, min(retryAfter, limit))
}

// retryHint carries a response's Retry-After from the transport back to the
// caller, which go-openai's error types do not expose.
type retryHint struct {
	mu    sync.Mutex
	after time.Duration
}

type retryHintKey struct{}

func withRetryHint(ctx context.Context) (context.Context, *retryHint) {
	h := &retryHint{}
	return context.WithValue(ctx, retryHintKey{}, h), h
}

func (h *retryHint) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.after
}

// retryAfterTransport records the Retry-After header (seconds form) of 429
// and 503 responses into the request's retryHint.
type retryAfterTransport struct {
	base http.RoundTripper
}

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	if h, ok := req.Context().Value(retryHintKey{}).(*retryHint); ok {
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
			h.mu.Lock()
			h.after = time.Duration(secs) * time.Second
			h.mu.Unlock()
		}
	}
	return resp, nil
}
