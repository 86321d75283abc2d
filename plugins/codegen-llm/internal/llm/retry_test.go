package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/cexec/cexec/internal/ctxsleep"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"milliseconds win", map[string]string{"Retry-After": "20", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			if got := retryAfter(h, now); got != tc.want {
				t.Errorf("retryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	for attempt := range 12 {
		d := baseBackoff << attempt
		if d > maxBackoff {
			d = maxBackoff
		}
		for range 50 {
			if got := backoff(attempt); got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}

// statusServer answers every request with the given statuses in turn and
// counts requests.
func statusServer(t *testing.T, statuses ...int) (*httptest.Server, *int) {
	t.Helper()
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := statuses[min(n, len(statuses)-1)]
		n++
		if s == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "90")
		}
		w.WriteHeader(s)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRetryPolicy(t *testing.T) {
	client := newHTTPClient(nil)
	get := func(url string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode >= 400 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	}
	// A port nothing listens on: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		name         string
		statuses     []int
		url          string
		maxRetries   int
		wantAttempts int
		wantWaits    int
		wantErr      string
	}{
		{"success", []int{200}, "", 3, 1, 0, ""},
		{"5xx then success", []int{502, 503, 200}, "", 3, 3, 2, ""},
		{"4xx is final", []int{404}, "", 3, 1, 0, "status 404"},
		{"retries run out", []int{500}, "", 2, 3, 2, "after 3 attempts"},
		{"zero retries", []int{500}, "", 0, 1, 0, "status 500"},
		{"retry-after beyond the cap fails fast", []int{429}, "", 3, 1, 0, "longer than cexec waits"},
		{"refused connections are retried", nil, refused, 2, 3, 2, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			var n *int
			if url == "" {
				var srv *httptest.Server
				srv, n = statusServer(t, tc.statuses...)
				url = srv.URL
			}
			var waits []time.Duration
			p := &retryPolicy{maxRetries: tc.maxRetries, timeout: 5 * time.Second,
				sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			attempts, err := p.do(t.Context(), get(url))
			if attempts != tc.wantAttempts || len(waits) != tc.wantWaits {
				t.Errorf("attempts %d waits %v, want %d and %d waits", attempts, waits, tc.wantAttempts, tc.wantWaits)
			}
			if n != nil && *n != tc.wantAttempts {
				t.Errorf("server saw %d requests", *n)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRetryPolicyTimeoutIsNotRetried(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	client := newHTTPClient(nil)
	p := &retryPolicy{maxRetries: 3, timeout: 50 * time.Millisecond, sleep: ctxsleep.Sleep}
	attempts, err := p.do(t.Context(), func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	if attempts != 1 || err == nil || !strings.Contains(err.Error(), "request_timeout") {
		t.Fatalf("attempts %d err %v; want one attempt failing on request_timeout", attempts, err)
	}
}

func TestRetryPolicyStopsWhenCallerGivesUp(t *testing.T) {
	srv, _ := statusServer(t, 503)
	client := newHTTPClient(nil)
	ctx, cancel := context.WithCancel(t.Context())
	p := &retryPolicy{maxRetries: 5, timeout: time.Second,
		sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctxsleep.Sleep(ctx, d) }}
	_, err := p.do(ctx, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return fmt.Errorf("status %d", resp.StatusCode)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRetryPolicyReadsStatusFromMistralErrors(t *testing.T) {
	calls := 0
	var waits []time.Duration
	p := &retryPolicy{maxRetries: 2, timeout: time.Second,
		sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	_, err := p.do(t.Context(), func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.New(`(HTTP Error 429) {"message":"Requests rate limit exceeded"}`)
		}
		return errors.New(`(HTTP Error 401) {"message":"Unauthorized"}`)
	})
	if calls != 2 || len(waits) != 1 || errStatus(err) != 401 {
		t.Fatalf("calls %d waits %v status %d", calls, waits, errStatus(err))
	}
}

func TestReasoningFamily(t *testing.T) {
	for model, want := range map[string]bool{
		"o1": true, "o1-mini": true, "o3-mini-2025-01-31": true, "o4-mini": true, "gpt-5": true, "gpt-5-mini": true,
		"gpt-5.1": true, "openai/o3": true, "GPT-5-nano": true, "gpt-6-astra": true,
		"gpt-4o": false, "gpt-4.1-mini": false, "o1x": false, "llama3.1:8b": false, "claude-sonnet-4-5": false, "gpt-50": false,
	} {
		if got := reasoningFamily(model); got != want {
			t.Errorf("reasoningFamily(%q) = %v, want %v", model, got, want)
		}
	}
}

func TestLearnFromRefusals(t *testing.T) {
	apiErr := func(status int, msg, param string) error {
		e := &openai.APIError{HTTPStatusCode: status, Message: msg}
		if param != "" {
			e.Param = &param
		}
		return &requestError{status: status, attempts: 1, err: e}
	}
	plain := func(status int, msg string) error {
		return &requestError{status: status, attempts: 1, err: errors.New(msg)}
	}
	for _, tc := range []struct {
		name string
		err  error
		in   quirks
		want quirks
		ok   bool
	}{
		{"openai max_tokens", apiErr(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "max_tokens"),
			quirks{}, quirks{maxCompletionTokens: true}, true},
		{"azure wording without param", apiErr(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", ""),
			quirks{}, quirks{maxCompletionTokens: true}, true},
		{"openai temperature", apiErr(400, "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.", "temperature"),
			quirks{}, quirks{noTemperature: true}, true},
		{"compatible server rejects max_completion_tokens", plain(400, `{"detail":"Extra inputs are not permitted: max_completion_tokens"}`),
			quirks{maxCompletionTokens: true}, quirks{}, true},
		{"422 from a pydantic server", plain(422, "temperature: unsupported for this model"),
			quirks{}, quirks{noTemperature: true}, true},
		{"go-openai refuses max_tokens before sending", &requestError{err: fmt.Errorf("wrapped: %w", openai.ErrReasoningModelMaxTokensDeprecated)},
			quirks{}, quirks{maxCompletionTokens: true}, true},
		{"go-openai refuses temperature before sending", &requestError{err: openai.ErrReasoningModelLimitationsOther},
			quirks{maxCompletionTokens: true}, quirks{maxCompletionTokens: true, noTemperature: true}, true},
		{"max_tokens too large is not a refusal", apiErr(400, "max_tokens is too large: 100000. This model supports at most 16384 completion tokens.", ""),
			quirks{}, quirks{}, false},
		{"already adapted", apiErr(400, "Unsupported parameter: 'max_tokens' is not supported with this model.", "max_tokens"),
			quirks{maxCompletionTokens: true}, quirks{maxCompletionTokens: true}, false},
		{"a 401 teaches nothing", apiErr(401, "Incorrect API key provided", ""), quirks{}, quirks{}, false},
		{"a 500 mentioning temperature teaches nothing", plain(500, "temperature unsupported"), quirks{}, quirks{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, ok := learn(tc.err, tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("learn = %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
