package catalog

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
)

// headerAuthorizer signs each session with a bearer token naming its
// tenant, the way core/auth.Manager signs it with the tenant's token.
type headerAuthorizer struct{}

func (headerAuthorizer) Client(_ *config.MCPServer, tenant string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer t-"+tenant)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAuthorizerSignsEachTenantsSession runs the reference server behind a
// proxy that records the Authorization header: over streamable HTTP and
// SSE, a tenant-scoped server's sessions each carry their own tenant's
// token, and no request goes out unsigned.
func TestAuthorizerSignsEachTenantsSession(t *testing.T) {
	bin := testpeers.Bin(t, "mcp-server-everything")
	for _, tt := range []struct {
		mode, transport, path string
	}{
		{"streamableHttp", config.TransportHTTP, "/mcp"},
		{"sse", config.TransportSSE, "/sse"},
	} {
		t.Run(tt.transport, func(t *testing.T) {
			port := freePort(t)
			runPeer(t, bin, port, tt.mode)
			target, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(port))
			var mu sync.Mutex
			var seen []string
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.FlushInterval = -1
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				if a := r.Header.Get("Authorization"); !slices.Contains(seen, a) {
					seen = append(seen, a)
				}
				mu.Unlock()
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			scoped := &config.MCPServer{Name: "everything", Transport: tt.transport, URL: ts.URL + tt.path, Timeout: 20 * time.Second,
				Scope: config.ScopeTenant, OAuth: &config.OAuth{}}
			c := start(t, Options{Authorizer: headerAuthorizer{}}, scoped)
			if _, err := c.Call(context.Background(), "acme", "everything", "get-sum", json.RawMessage(`{"a": 2, "b": 40}`)); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := slices.Clone(seen)
			mu.Unlock()
			slices.Sort(got)
			if !slices.Equal(got, []string{"Bearer t-acme", "Bearer t-default"}) {
				t.Errorf("Authorization headers seen: %q, want each tenant's own and nothing unsigned", got)
			}
		})
	}
}
