package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testpeers"
	"github.com/cexec/cexec/internal/testutil"
)

// TestOperations runs one cexecd with a metrics block and the real memory
// server, then: a real Prometheus (Debian's) scrapes it and PromQL finds
// the executions and tool calls; `cexecctl audit verify` passes, then
// names the line edited by hand; `cexecctl doctor` on a PATH without
// bubblewrap says how to install it.
func TestOperations(t *testing.T) {
	memory := testpeers.Bin(t, "mcp-server-memory")
	s := newSetup(t)
	metricsPort := freePort(t)
	appendConfig(t, s, fmt.Sprintf("\nmetrics {\n  listen = \"127.0.0.1:%d\"\n}\n\nmcp_server \"memory\" {\n  command = %q\n  env     = { MEMORY_FILE_PATH = %q }\n}\n",
		metricsPort, memory, filepath.Join(s.dir, "memory.jsonl")))
	d := startDaemon(t, s)
	sandboxOrSkip(t, s) // one ok execution

	mustCtl(t, s, "exec", "-c", "print('two')")
	if _, _, code := ctl(t, s, "exec", "-c", "raise SystemExit(3)"); code == 0 {
		t.Fatal("a failing program exited 0")
	}
	if out := mustCtl(t, s, "exec", "-c", "from servers.memory import read_graph\nprint(type(read_graph()).__name__)"); !strings.Contains(out, "dict") {
		t.Fatalf("tool call from code printed %q", out)
	}

	t.Run("prometheus scrapes cexecd", func(t *testing.T) {
		body := get(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		for _, want := range []string{`cexec_executions_total{outcome="ok",tenant="default"}`, `cexec_tool_call_duration_seconds_bucket{server="memory",tool="read_graph"`,
			`cexec_plugin_up{kind="sandbox",plugin="bwrap"} 1`, `cexec_upstream_up{server="memory"} 1`, `cexec_pool_sandboxes{`, `cexec_plugin_call_duration_seconds_count{kind="sandbox",method="Exec",plugin="bwrap"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		promURL := startPrometheus(t, metricsPort)
		if v := promQuery(t, promURL, `cexec_executions_total{tenant="default",outcome="ok"}`, 2); v < 2 {
			t.Errorf("cexec_executions_total{outcome=ok} = %v, want >= 2", v)
		}
		if v := promQuery(t, promURL, `sum(cexec_tool_calls_total{server="memory",tool="read_graph",outcome="ok"})`, 1); v < 1 {
			t.Errorf("tool calls = %v, want >= 1", v)
		}
		if v := promQuery(t, promURL, `cexec_executions_total{tenant="default",outcome="error"}`, 1); v < 1 {
			t.Errorf("failed executions = %v, want >= 1", v)
		}
	})

	t.Run("audit verify detects an edited line", func(t *testing.T) {
		out := mustCtl(t, s, "audit", "verify")
		if !strings.Contains(out, "tenant default: ok") {
			t.Fatalf("audit verify: %s", out)
		}
		log := filepath.Join(s.dir, "data", "tenants", "default", "audit", "audit.jsonl")
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if !strings.Contains(text, `"type":"tool_call"`) || !strings.Contains(text, `"args_sha256":"`) || strings.Contains(text, "read_graph()") {
			t.Fatalf("audit log lacks the tool call's hash, or holds code:\n%s", text)
		}
		lines := strings.SplitAfter(text, "\n")
		edited := strings.Replace(lines[1], `"outcome":"`, `"outcome":"x`, 1)
		if edited == lines[1] {
			t.Fatalf("line 2 has no outcome: %s", lines[1])
		}
		lines[1] = edited
		if err := os.WriteFile(log, []byte(strings.Join(lines, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, code := ctl(t, s, "audit", "verify")
		if code != 1 || !strings.Contains(out, "BROKEN at audit.jsonl line 2") || !strings.Contains(out, "edited") {
			t.Fatalf("edited line not reported (exit %d): %s", code, out)
		}
		// A tenant no config names and nobody used is not created to verify it.
		if out, _, code := ctl(t, s, "audit", "verify", "--tenant", "nosuch"); code != 1 || !strings.Contains(out, "no tenant nosuch") {
			t.Errorf("unknown tenant: exit %d: %s", code, out)
		}
		if _, err := os.Stat(filepath.Join(s.dir, "data", "tenants", "nosuch")); !os.IsNotExist(err) {
			t.Errorf("verify created the tenant: %v", err)
		}
	})

	t.Run("SIGHUP reloads upstreams and refuses a broken config", func(t *testing.T) {
		orig, err := os.ReadFile(s.config)
		if err != nil {
			t.Fatal(err)
		}
		extra := fmt.Sprintf("\nmcp_server \"memory2\" {\n  command = %q\n  env     = { MEMORY_FILE_PATH = %q }\n}\n", memory, filepath.Join(s.dir, "memory2.jsonl"))
		reload := func(cfg string) {
			t.Helper()
			if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
		reload(string(orig) + extra)
		waitFor(t, "memory2 to connect", func() bool { return listServers(t, s)["memory2"].State == "ok" })
		if out := mustCtl(t, s, "exec", "-c", "from servers.memory2 import read_graph\nprint(type(read_graph()).__name__)"); !strings.Contains(out, "dict") {
			t.Fatalf("tool of the added server: %q", out)
		}
		reload(string(orig) + extra + "\nmcp_server \"broken\" {\n  timeout = \"soon\"\n}\n")
		waitFor(t, "the broken config's diagnostics in the log", func() bool {
			return strings.Contains(d.stderr.String(), "config reload refused") && strings.Contains(d.stderr.String(), "cexec.hcl:")
		})
		daemonServes(t, s, d)
		// An open tenant's allowed_servers change without a restart.
		readGraph := "from servers.memory import read_graph\nprint(type(read_graph()).__name__)"
		mustCtl(t, s, "exec", "--tenant", "acme", "-c", readGraph)
		reload(string(orig) + extra + "\ntenant \"acme\" {\n  allowed_servers = [\"memory2\"]\n}\n")
		waitFor(t, "acme to lose the memory server", func() bool {
			_, _, code := ctl(t, s, "exec", "--tenant", "acme", "-c", readGraph)
			return code != 0
		})
		if !strings.Contains(d.stderr.String(), "config reload applied: change=\"tenant limits") {
			t.Error("the daemon log does not say the tenant limits were applied")
		}
		reload(string(orig))
		waitFor(t, "memory2 to go", func() bool { _, ok := listServers(t, s)["memory2"]; return !ok })
		// The default tenant's log was edited above; the daemon's is intact.
		// A reload is recorded last, after the catalog shows it.
		var out string
		waitFor(t, "the daemon's audit log to record four reloads", func() bool {
			out, _, _ = ctl(t, s, "audit", "verify", "--all")
			return !strings.Contains(out, "daemon: ok, 3 lines")
		})
		if !strings.Contains(out, "daemon: ok, 4 lines") {
			t.Errorf("daemon audit log after four reloads: %s", out)
		}
	})

	t.Run("doctor explains a machine without bubblewrap", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), "doctor", "--config", s.config)
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("doctor: %v, want exit 1\n%s", err, out)
		}
		for _, want := range []string{"FAIL  bubblewrap", "apt-get install bubblewrap", "checked without a daemon"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
		// With the daemon up, it runs the checks and adds its live state.
		out2 := mustCtl(t, s, "doctor", "--json")
		if !strings.Contains(out2, `"name": "upstream memory"`) || !strings.Contains(out2, `"daemon": true`) || !strings.Contains(out2, `"name": "config"`) {
			t.Errorf("daemon doctor lacks its live checks:\n%s", out2)
		}
	})
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", u, resp.Status, b.String())
	}
	return b.String()
}

// startPrometheus runs Debian's prometheus scraping 127.0.0.1:port every
// second and returns its base URL.
func startPrometheus(t *testing.T, port int) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testutil.SkipMissing(t, "prometheus is not installed (scripts/deps.sh installs Debian's)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: cexecd\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n", port)), 0o600); err != nil {
		t.Fatal(err)
	}
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out)
		}
	})
	return "http://" + web
}

// promQuery polls Prometheus's query API until expr has a sample of at
// least want (scrapes come every second), and returns the last value.
func promQuery(t *testing.T, base, expr string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last float64
	var lastBody string
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err == nil {
			var r struct {
				Status string `json:"status"`
				Data   struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&r)
			_ = resp.Body.Close()
			lastBody = fmt.Sprintf("%+v", r)
			if err == nil && r.Status == "success" && len(r.Data.Result) > 0 {
				if s, ok := r.Data.Result[0].Value[1].(string); ok {
					last, _ = strconv.ParseFloat(s, 64)
					if last >= want {
						return last
					}
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("query %s: no sample >= %v; last answer %s", expr, want, lastBody)
	return last
}
