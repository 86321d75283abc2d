package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil/idptest"
)

// TestMCPOAuthServed: cexec.hcl's mcp.oauth block makes the daemon's TCP
// face a resource server of a protocol-level identity provider
// (internal/testutil/idptest), with no static tokens: a request without a
// token is pointed at the protected resource metadata, which names the
// configured audience; a token of the provider for that audience opens a
// session of the tenant its claim names; a token for another audience is
// refused.
func TestMCPOAuthServed(t *testing.T) {
	idp := idptest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	audience := "http://" + addr + endpoint.MCPPath
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "cexecd.sock")
	cfg := writeConfig(t, dir, fmt.Sprintf(`cexec {
  data_dir = "data"
  socket   = "run/cexecd.sock"
}
mcp {
  listen = %q
  oauth {
    issuer          = %q
    audience        = %q
    tenant_claim    = %q
    required_scopes = ["mcp"]
  }
}
`, addr, idp.Issuer, audience, idp.TenantClaim))
	d := start(t, Options{ConfigFile: cfg})
	d.ready(t, sock)

	res, err := http.Post(audience, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	mdURL := "http://" + addr + "/.well-known/oauth-protected-resource/mcp"
	if want := `Bearer realm="cexec", resource_metadata="` + mdURL + `"`; res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %s, WWW-Authenticate %q, want 401 and %q", res.Status, res.Header.Get("WWW-Authenticate"), want)
	}
	res, err = http.Get(mdURL)
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(res.Body).Decode(&md)
	_ = res.Body.Close()
	if err != nil || md.Resource != audience || len(md.Servers) != 1 || md.Servers[0] != idp.Issuer {
		t.Fatalf("protected resource metadata: %+v (%v)", md, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	good := idp.Sign(idp.Claims(audience, "acme", "mcp"))
	c, err := client.NewStreamableHttpClient(audience, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + good}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initialize(ctx, t, c)
	if out, isErr := callTool(t, c, "state", map[string]any{"name": "who.json", "value": "acme"}); isErr {
		t.Errorf("state over an access token: %s", out)
	}
	_ = c.Close()
	acme := mcpSession(t, endpoint.MCPSocket(sock), "acme")
	// The value, then the line with its version (the face versions state).
	if out, isErr := callTool(t, acme, "state", map[string]any{"name": "who.json"}); isErr || !strings.HasPrefix(out, `"acme"`+"\nversion: ") {
		t.Errorf("the token's session did not write tenant acme's state: %v %s", isErr, out)
	}
	_ = acme.Close()

	other := idp.Sign(idp.Claims("https://other.example/mcp", "acme", "mcp"))
	req, _ := http.NewRequest(http.MethodPost, audience, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+other)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(res.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("token for another audience: %s, WWW-Authenticate %q", res.Status, res.Header.Get("WWW-Authenticate"))
	}
}
