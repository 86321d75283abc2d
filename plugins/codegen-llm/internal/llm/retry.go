package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Backoff bounds. A Retry-After longer than maxRetryAfter is not waited
// for: the request fails at once and the pipeline moves to its next
// generator instead of stalling.
const (
	baseBackoff   = 500 * time.Millisecond
	maxBackoff    = 20 * time.Second
	maxRetryAfter = 60 * time.Second
)

// exchange records what the transport saw of one request, so the retry
// loop can classify failures the same way for every provider library,
// whatever error type the library wraps the response in, and honour
// Retry-After, which no library surfaces.
type exchange struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
	connFailed bool
}

func (e *exchange) record(status int, retryAfter time.Duration, connFailed bool) {
	e.mu.Lock()
	e.status, e.retryAfter, e.connFailed = status, retryAfter, connFailed
	e.mu.Unlock()
}

func (e *exchange) get() (status int, retryAfter time.Duration, connFailed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status, e.retryAfter, e.connFailed
}

type exchangeKey struct{}

func withExchange(ctx context.Context, e *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, e)
}

// transport records each response's status and Retry-After in the request
// context's exchange and adds the provider's auth headers where its library
// cannot be given the key (see providers.go). It never logs.
type transport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header[k] = v
		}
	}
	resp, err := t.base.RoundTrip(req)
	if e, ok := req.Context().Value(exchangeKey{}).(*exchange); ok {
		if err != nil {
			e.record(0, 0, req.Context().Err() == nil)
		} else {
			e.record(resp.StatusCode, retryAfter(resp.Header, time.Now()), false)
		}
	}
	return resp, err
}

// newHTTPClient returns the client every provider library gets. Timeouts
// come from the per-attempt context, not from the client.
func newHTTPClient(headers http.Header) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{Transport: &transport{base: base, headers: headers}}
}

// retryAfter reads retry-after-ms (OpenAI, Azure) or Retry-After in seconds
// or as an HTTP date; zero when absent or unparsable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// statusInText finds an HTTP status in errors of libraries that do not let
// us see the response (mistral-go: "(HTTP Error 429) ...").
var statusInText = regexp.MustCompile(`\(HTTP Error (\d{3})\)`)

// retryPolicy runs one model request with retries.
type retryPolicy struct {
	maxRetries int
	timeout    time.Duration
	// sleep waits d or until ctx ends; tests replace it to observe delays.
	sleep func(ctx context.Context, d time.Duration) error
	// onRetry is told about each retry before it waits.
	onRetry func(attempt, status int, delay time.Duration, err error)
}

// requestError is a request that failed for good, with the HTTP status
// that ended it (0 when there was no response).
type requestError struct {
	status   int
	attempts int
	err      error
}

func (e *requestError) Error() string {
	if e.attempts > 1 {
		return fmt.Sprintf("%v (after %d attempts)", e.err, e.attempts)
	}
	return e.err.Error()
}

func (e *requestError) Unwrap() error { return e.err }

// do calls fn until it succeeds, fails in a way a retry cannot fix, or
// retries run out. Each call gets its own timeout. HTTP 429, 5xx and failed
// connections are retried with exponential backoff and full jitter, or
// after the server's Retry-After when it sends one. A request that times
// out is not retried: the timeout is the user's bound on one request.
func (p *retryPolicy) do(ctx context.Context, fn func(ctx context.Context) error) (attempts int, err error) {
	for attempt := 0; ; attempt++ {
		ex := &exchange{}
		actx, cancel := context.WithTimeout(withExchange(ctx, ex), p.timeout)
		err := fn(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil {
			return attempt + 1, nil
		}
		if ctx.Err() != nil {
			return attempt + 1, ctx.Err()
		}
		status, wait, connFailed := ex.get()
		if status == 0 {
			if m := statusInText.FindStringSubmatch(err.Error()); m != nil {
				status, _ = strconv.Atoi(m[1])
			}
		}
		fail := func(err error) (int, error) {
			return attempt + 1, &requestError{status: status, attempts: attempt + 1, err: err}
		}
		if timedOut && status == 0 {
			return fail(fmt.Errorf("no reply within request_timeout %s: %w", p.timeout, err))
		}
		retryable := status == http.StatusTooManyRequests || status >= 500 || (status == 0 && connFailed)
		if !retryable || attempt >= p.maxRetries {
			return fail(err)
		}
		delay := wait
		if delay == 0 {
			delay = backoff(attempt)
		}
		if delay > maxRetryAfter {
			return fail(fmt.Errorf("%w; the server asks to retry after %s, longer than cexec waits", err, delay.Round(time.Second)))
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return fail(fmt.Errorf("%w; no time left to retry after %s", err, delay.Round(time.Millisecond)))
		}
		if p.onRetry != nil {
			p.onRetry(attempt+1, status, delay, err)
		}
		if err := p.sleep(ctx, delay); err != nil {
			return attempt + 1, err
		}
	}
}

// backoff is the wait before retry number attempt+1: exponential with full
// jitter in its upper half, so concurrent clients spread out.
func backoff(attempt int) time.Duration {
	d := baseBackoff << min(attempt, 10)
	if d > maxBackoff {
		d = maxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// errStatus returns the HTTP status a failed request ended with, or 0.
func errStatus(err error) int {
	var re *requestError
	if errors.As(err, &re) {
		return re.status
	}
	return 0
}
