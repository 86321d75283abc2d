package mcpface

import (
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/cexec/cexec/internal/testutil/idptest"
)

// TestSessionStartReportsAuth: a session opened with a static token is
// reported once with AuthToken and its tenant; requests within the session
// and refused ones are not sign-ins.
func TestSessionStartReportsAuth(t *testing.T) {
	var mu sync.Mutex
	var got []string
	w := newWorld(t, func(o *Options, _ *world) {
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}}
		o.OnSessionStart = func(sc Scope, auth string) {
			mu.Lock()
			got = append(got, sc.Tenant+"/"+auth+"/"+sc.Session)
			mu.Unlock()
		}
	})
	refused := newRaw(t, nil, w.url+"/mcp")
	refused.header.Set("Authorization", "Bearer tok-nope")
	if st := refused.initialize(); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", st)
	}
	c := newRaw(t, nil, w.url+"/mcp")
	c.header.Set("Authorization", "Bearer tok-acme")
	if st := c.initialize(); st != http.StatusOK {
		t.Fatalf("initialize: %d", st)
	}
	if res, _ := c.do(http.MethodPost, listBody); res.StatusCode != http.StatusOK {
		t.Fatalf("tools/list: %s", res.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"acme/" + AuthToken + "/" + c.session}; !slices.Equal(got, want) {
		t.Errorf("sign-ins %q, want %q", got, want)
	}
}

// TestOAuthSignInReported: a session opened with a JWT of the
// protocol-level identity provider is reported as AuthOAuth, one opened
// with a static token beside it as AuthToken.
func TestOAuthSignInReported(t *testing.T) {
	idp := idptest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aud := "http://" + ln.Addr().String() + "/mcp"
	var mu sync.Mutex
	got := map[string]string{}
	w := newWorld(t, func(o *Options, w *world) {
		o.Tokens = []Token{{Token: "static-ops", Tenant: "ops"}}
		o.OAuth = &OAuth{Issuer: idp.Issuer, Audience: aud, TenantClaim: idp.TenantClaim}
		o.OnSessionStart = func(sc Scope, auth string) {
			mu.Lock()
			got[sc.Tenant] = auth
			mu.Unlock()
		}
		w.ln = ln
	})
	for _, tok := range []string{idptest.SignWith(t, idp.Keys()[0], idp.Claims(aud, "acme", "")), "static-ops"} {
		c := newRaw(t, nil, w.url+"/mcp")
		c.header.Set("Authorization", "Bearer "+tok)
		if st := c.initialize(); st != http.StatusOK {
			t.Fatalf("initialize: %d", st)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got["acme"] != AuthOAuth || got["ops"] != AuthToken {
		t.Errorf("sign-ins %v: want acme by %s, ops by %s", got, AuthOAuth, AuthToken)
	}
}
