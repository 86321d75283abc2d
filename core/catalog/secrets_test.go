package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
)

// TestSecretsMaskedInResults: a server given a secret through env() that
// returns it (server-everything's get-env lists its environment) hands the
// caller "(sensitive)" in its place, in text and structured content, so the
// secret reaches no sandbox, session log or model.
func TestSecretsMaskedInResults(t *testing.T) {
	const token, quoted = "tok-3f9a1c77e2", `pa"ss\word-1234`
	t.Setenv("CEXEC_TEST_TOKEN", token)
	t.Setenv("CEXEC_TEST_QUOTED", quoted)
	dir := t.TempDir()
	path := filepath.Join(dir, "cexec.hcl")
	src := fmt.Sprintf(`cexec {
  data_dir = %q
}
mcp_server "everything" {
  command = %q
  args    = ["stdio"]
  env     = { API_TOKEN = env("CEXEC_TEST_TOKEN"), OTHER = "${env("CEXEC_TEST_QUOTED")}!", SHORT = env("NOPE_UNSET", "info") }
}
`, filepath.Join(dir, "data"), testpeers.Bin(t, "mcp-server-everything"))
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Overrides{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	c, err := New(cfg, Options{ServersDir: filepath.Join(dir, "servers"), Logger: testpeers.Logger(t, "catalog", hclog.Debug)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, "default", "everything", "get-env", nil)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(mcp.TextContent).Text
	var env map[string]string
	if err := json.Unmarshal([]byte(text), &env); err != nil {
		t.Fatalf("get-env: %v: %s", err, text)
	}
	if env["API_TOKEN"] != "(sensitive)" || env["OTHER"] != "(sensitive)!" {
		t.Errorf("get-env shows API_TOKEN %q and OTHER %q, want them masked", env["API_TOKEN"], env["OTHER"])
	}
	if env["SHORT"] != "info" {
		t.Errorf("SHORT = %q: a value too short to be a secret was masked", env["SHORT"])
	}
	res, err = c.Call(ctx, "default", "everything", "echo", json.RawMessage(`{"message":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(mcp.TextContent).Text; strings.Contains(got, token) {
		t.Errorf("echo returned the secret: %q", got)
	}
}

// TestSecretsMaskedInStderr: a server printing a secret on stderr does not
// put it in cexecd's log.
func TestSecretsMaskedInStderr(t *testing.T) {
	var buf strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	w := &lineLogger{log: log, mask: new(atomic.Pointer[secretMask])}
	w.mask.Store(newSecretMask([]string{"s3cr3t-value-99"}))
	fmt.Fprintf(w, "starting with token s3cr3t-value-99\n")
	if out := buf.String(); strings.Contains(out, "s3cr3t") || !strings.Contains(out, "starting with token (sensitive)") {
		t.Errorf("logged %q", out)
	}
}
