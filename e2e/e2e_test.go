// Package e2e drives the real binaries: it builds cexecd, cexecctl, the
// example selector plugin and every plugin under plugins/ that builds,
// starts cexecd on a private socket and uses cexecctl as a user would.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/internal/testutil"
)

// bins holds the binaries built once for all tests.
var bins struct {
	dir       string // cexecd and cexecctl
	pluginDir string
	// plugins are the plugin blocks of the default cexec.hcl whose
	// binaries were built.
	plugins []string
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "cexec-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

func build(dir string) error {
	root := testutil.ModuleRoot()
	bins.dir = dir
	bins.pluginDir = filepath.Join(dir, "plugins")
	gobuild := testutil.GoBuild
	for out, pkg := range map[string]string{
		filepath.Join(dir, "cexecd"):                                   "./cmd/cexecd",
		filepath.Join(dir, "cexecctl"):                                 "./cmd/cexecctl",
		filepath.Join(dir, "cexecctl-bench"):                           "./cmd/cexecctl-bench",
		filepath.Join(bins.pluginDir, "cexec-plugin-selector-keyword"): "./examples/plugin-selector-keyword",
	} {
		if err := gobuild(out, pkg); err != nil {
			return err
		}
	}
	// The real plugins of the repository's default cexec.hcl join the
	// run, with their blocks copied verbatim, once their code exists.
	src, err := os.ReadFile(filepath.Join(root, "cexec.hcl"))
	if err != nil {
		return fmt.Errorf("read default config: %w", err)
	}
	file, diags := hclsyntax.ParseConfig(src, "cexec.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return fmt.Errorf("parse default config: %s", diags.Error())
	}
	for _, blk := range file.Body.(*hclsyntax.Body).Blocks {
		if blk.Type != "plugin" || len(blk.Labels) != 2 {
			continue
		}
		pkg := "./plugins/" + blk.Labels[0] + "-" + blk.Labels[1]
		if _, err := os.Stat(filepath.Join(root, pkg, "main.go")); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s has no main.go yet; not included\n", pkg)
			continue
		}
		if err := gobuild(filepath.Join(bins.pluginDir, "cexec-plugin-"+blk.Labels[0]+"-"+blk.Labels[1]), pkg); err != nil {
			return err
		}
		bins.plugins = append(bins.plugins, string(blk.Range().SliceBytes(src)))
	}
	return nil
}

// setup is one test's directory, socket and config.
type setup struct {
	dir    string
	sock   string
	config string
}

const secret = "s3cr3t-e2e-value"

func newSetup(t *testing.T) setup {
	t.Helper()
	// Short paths: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cexec-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unmountUnder(t, dir) // what a killed cexecd left mounted
		_ = os.RemoveAll(dir)
	})
	s := setup{dir: dir, sock: filepath.Join(dir, "run", "cexecd.sock"), config: filepath.Join(dir, "cexec.hcl")}
	var b strings.Builder
	fmt.Fprintf(&b, "cexec {\n  data_dir   = %q\n  socket     = %q\n  plugin_dir = %q\n  log_level  = \"debug\"\n}\n\n",
		filepath.Join(dir, "data"), s.sock, bins.pluginDir)
	b.WriteString("plugin \"selector\" \"keyword\" {\n  max_hits  = 10\n  stopwords = [\"the\", env(\"CEXEC_E2E_SECRET\")]\n}\n")
	for _, blk := range bins.plugins {
		fmt.Fprintf(&b, "\n%s\n", blk)
	}
	// The example is the selector the tests kill and ping.
	b.WriteString("\npipeline {\n  selector = \"keyword\"\n}\n")
	if err := os.WriteFile(s.config, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// appendConfig adds text to s's cexec.hcl.
func appendConfig(t *testing.T, s setup, text string) {
	t.Helper()
	f, err := os.OpenFile(s.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// daemon is a running cexecd.
type daemon struct {
	cmd    *exec.Cmd
	stderr *testutil.Buffer
	exited chan struct{}
}

func startDaemon(t *testing.T, s setup, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins.dir, "cexecd"), append([]string{"-config", s.config}, args...)...)
	cmd.Env = append(os.Environ(), "CEXEC_E2E_SECRET="+secret)
	d := &daemon{cmd: cmd, stderr: &testutil.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		// A stop, not a kill: cexecd unmounts the tenants' images.
		select {
		case <-d.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-d.exited
			}
		}
		if t.Failed() {
			t.Logf("cexecd stderr:\n%s", d.stderr)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, _, code := ctl(t, s, "status"); code == 0 {
			return d
		}
		select {
		case <-d.exited:
			t.Fatalf("cexecd exited before its socket was ready: %v\n%s", cmd.ProcessState, d.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cexecd socket %s not ready after 15s\n%s", s.sock, d.stderr)
		}
	}
}

// ctl runs cexecctl against s's socket (through $CEXECD_ADDRESS) and
// returns stdout, stderr and the exit code.
func ctl(t *testing.T, s setup, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins.dir, "cexecctl"), args...)
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+s.sock)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	t.Fatalf("cexecctl %v: %v", args, err)
	return "", "", -1
}

// mustCtl is ctl that fails the test on a non-zero exit.
func mustCtl(t *testing.T, s setup, args ...string) string {
	t.Helper()
	out, errOut, code := ctl(t, s, args...)
	if code != 0 {
		t.Fatalf("cexecctl %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

type pluginJSON struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	Status   string `json:"status"`
	Restarts int    `json:"restarts"`
	PID      int    `json:"pid"`
}

func listPlugins(t *testing.T, s setup) map[string]pluginJSON {
	t.Helper()
	var r struct {
		Plugins []pluginJSON `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(mustCtl(t, s, "plugins", "ls", "--json")), &r); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]pluginJSON, len(r.Plugins))
	for _, p := range r.Plugins {
		out[p.Kind+"/"+p.Name] = p
	}
	return out
}

// TestDaemonAndCLI drives one real cexecd through the scenario below.
// It is long because it is one daemon's life, start to shutdown, with the
// CLI checks that need it running in the order they happen.
func TestDaemonAndCLI(t *testing.T) {
	s := newSetup(t)
	d := startDaemon(t, s)
	nPlugins := 1 + len(bins.plugins)

	t.Run("status", func(t *testing.T) {
		out := mustCtl(t, s, "status")
		for _, want := range []string{"config   " + s.config, "socket   " + s.sock, fmt.Sprintf("plugins  %d configured: %d ok, 0 restarting, 0 failed", nPlugins, nPlugins),
			"mcp      serving on socket " + endpoint.MCPSocket(s.sock)} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
		var st struct {
			Pid     int    `json:"pid"`
			Version string `json:"version"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Pid != d.cmd.Process.Pid || st.Version == "" {
			t.Errorf("status --json: pid %d version %q, want pid %d", st.Pid, st.Version, d.cmd.Process.Pid)
		}
	})

	t.Run("plugins ls", func(t *testing.T) {
		out := mustCtl(t, s, "plugins", "ls")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 1+nPlugins || strings.Join(strings.Fields(lines[0]), " ") != "KIND NAME VERSION API STATUS RESTARTS" {
			t.Fatalf("plugins ls:\n%s", out)
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) != 6 || f[3] != "v1" || f[4] != "ok" || f[5] != "0" {
				t.Errorf("plugin row %q: want api v1, status ok, 0 restarts", l)
			}
		}
		ps := listPlugins(t, s)
		kw, ok := ps["selector/keyword"]
		if !ok || kw.Status != "ok" || kw.PID <= 0 || kw.Version == "" {
			t.Errorf("plugins ls --json: keyword = %+v", kw)
		}
		// The repository's plugins are built with the daemon and report
		// its version; the example stands for a third party's plugin.
		var st struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal([]byte(mustCtl(t, s, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for id, p := range ps {
			if id != "selector/keyword" && p.Version != st.Version {
				t.Errorf("plugin %s reports version %q, cexecd %q", id, p.Version, st.Version)
			}
		}
	})

	t.Run("plugins ping", func(t *testing.T) {
		out := mustCtl(t, s, "plugins", "ping", "selector", "keyword")
		if !strings.HasPrefix(out, "selector keyword: ok") {
			t.Errorf("ping: %s", out)
		}
		_, errOut, code := ctl(t, s, "plugins", "ping", "selector", "nope")
		if code != 1 || !strings.Contains(errOut, "not configured") {
			t.Errorf("ping of an unconfigured plugin: exit %d, %s", code, errOut)
		}
	})

	t.Run("config show masks secrets", func(t *testing.T) {
		for _, args := range [][]string{{"config", "show"}, {"config", "show", "--json"}} {
			out := mustCtl(t, s, args...)
			if strings.Contains(out, secret) {
				t.Errorf("%v shows the secret:\n%s", args, out)
			}
			if !strings.Contains(out, "(sensitive)") || !strings.Contains(out, `"max_hits": 10`) {
				t.Errorf("%v: no masked value or no plugin config:\n%s", args, out)
			}
		}
		if strings.Contains(d.stderr.String(), secret) {
			t.Error("the secret appears in cexecd's log")
		}
	})

	t.Run("config check", func(t *testing.T) {
		out := mustCtl(t, s, "config", "check")
		if !strings.Contains(out, s.config+": configuration is valid") {
			t.Errorf("check of the daemon's own config: %s", out)
		}
		broken := filepath.Join(s.dir, "broken.hcl")
		body := fmt.Sprintf("cexec {\n  data_dir   = %q\n  plugin_dir = %q\n}\n\nplugin \"selector\" \"keyword\" {\n  max_hits = \"many\"\n}\n\nfrobnicate {}\n",
			filepath.Join(s.dir, "data"), bins.pluginDir)
		if err := os.WriteFile(broken, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		// A relative path is the caller's, not the daemon's.
		cmdDir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(cmdDir, broken)
		if err != nil {
			t.Fatal(err)
		}
		out, _, code := ctl(t, s, "config", "check", rel)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		for _, want := range []string{broken + ":7:", broken + ":10:1: error: Unsupported block type"} {
			if !strings.Contains(out, want) {
				t.Errorf("config check lacks %q:\n%s", want, out)
			}
		}
		// A plugin block the daemon does not run (another binary) is
		// validated by launching it: its own Configure rejects max_hits = 0.
		copyBin := filepath.Join(bins.pluginDir, "cexec-plugin-keyword-copy")
		b, err := os.ReadFile(filepath.Join(bins.pluginDir, "cexec-plugin-selector-keyword"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(copyBin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(s.dir, "other.hcl")
		body = fmt.Sprintf("cexec {\n  data_dir   = %q\n  plugin_dir = %q\n}\n\nplugin \"selector\" \"keyword\" {\n  command  = \"cexec-plugin-keyword-copy\"\n  max_hits = 0\n}\n",
			filepath.Join(s.dir, "data"), bins.pluginDir)
		if err := os.WriteFile(other, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, code = ctl(t, s, "config", "check", other)
		if code != 1 || !strings.Contains(out, other+":8:") {
			t.Errorf("config check of a plugin the daemon does not run: exit %d\n%s", code, out)
		}

		// The same through cexecd validate, without a daemon.
		var vout, verr bytes.Buffer
		v := exec.Command(filepath.Join(bins.dir, "cexecd"), "validate", "-config", broken)
		v.Stdout, v.Stderr = &vout, &verr
		if err := v.Run(); v.ProcessState.ExitCode() != 1 {
			t.Errorf("cexecd validate: %v, want exit 1", err)
		}
		for _, want := range []string{broken + ":7:", broken + ":10:1: error: Unsupported block type"} {
			if !strings.Contains(verr.String(), want) {
				t.Errorf("cexecd validate lacks %q:\n%s", want, verr.String())
			}
		}
		// A required server whose command is missing would stop the start,
		// so validate says so at the command's line.
		gone := filepath.Join(s.dir, "gone.hcl")
		body = fmt.Sprintf("cexec {\n  data_dir   = %q\n  plugin_dir = %q\n}\n\nplugin \"selector\" \"keyword\" {\n  max_hits = 10\n}\n\nmcp_server \"gone\" {\n  command = \"/nonexistent/bin\"\n}\n",
			filepath.Join(s.dir, "data"), bins.pluginDir)
		if err := os.WriteFile(gone, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		vout.Reset()
		verr.Reset()
		v = exec.Command(filepath.Join(bins.dir, "cexecd"), "validate", "-config", gone)
		v.Stdout, v.Stderr = &vout, &verr
		if err := v.Run(); v.ProcessState.ExitCode() != 1 || !strings.Contains(verr.String(), gone+":11:13: error: Cannot run server command") ||
			!strings.Contains(verr.String(), "1 error") {
			t.Errorf("cexecd validate of a missing server command: %v, want exit 1 for line 11 only\n%s", err, verr.String())
		}
		v = exec.Command(filepath.Join(bins.dir, "cexecd"), "validate", "-config", s.config)
		v.Env = append(os.Environ(), "CEXEC_E2E_SECRET="+secret)
		if b, err := v.CombinedOutput(); err != nil || !strings.Contains(string(b), "configuration is valid") {
			t.Errorf("cexecd validate of a good config: %v\n%s", err, b)
		}
	})

	t.Run("second daemon refuses", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(bins.dir, "cexecd"), "-config", s.config)
		cmd.Env = append(os.Environ(), "CEXEC_E2E_SECRET="+secret)
		b, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("second cexecd: %v, want exit 3\n%s", err, b)
		}
		want := fmt.Sprintf("another cexecd is already running on %s (pid %d)", s.sock, d.cmd.Process.Pid)
		if !strings.Contains(string(b), want) {
			t.Errorf("second cexecd output lacks %q:\n%s", want, b)
		}
		mustCtl(t, s, "status")
	})

	t.Run("killed plugin restarts", func(t *testing.T) {
		before := listPlugins(t, s)["selector/keyword"]
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		var after pluginJSON
		for time.Since(killed) < 10*time.Second {
			after = listPlugins(t, s)["selector/keyword"]
			if after.Status == "ok" && after.Restarts == 1 && after.PID != before.PID {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if after.Status != "ok" || after.Restarts != 1 || after.PID == before.PID {
			t.Fatalf("10s after SIGKILL: %+v (was %+v)", after, before)
		}
		t.Logf("plugin restarted %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
		if out := mustCtl(t, s, "plugins", "ping", "selector", "keyword"); !strings.HasPrefix(out, "selector keyword: ok") {
			t.Errorf("ping after restart: %s", out)
		}
		table := mustCtl(t, s, "plugins", "ls")
		for _, l := range strings.Split(table, "\n") {
			if f := strings.Fields(l); len(f) == 6 && f[1] == "keyword" && (f[4] != "ok" || f[5] != "1") {
				t.Errorf("plugins ls row after restart: %q", l)
			}
		}
	})

	t.Run("SIGTERM stops cleanly", func(t *testing.T) {
		pid := listPlugins(t, s)["selector/keyword"].PID
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-d.exited:
		case <-time.After(15 * time.Second):
			t.Fatal("cexecd still running 15s after SIGTERM")
		}
		if code := d.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit %d, want 0", code)
		}
		if _, err := os.Lstat(s.sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind: %v", err)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("plugin process %d still exists after shutdown (%v)", pid, err)
		}
	})

	t.Run("no daemon", func(t *testing.T) {
		_, errOut, code := ctl(t, s, "status")
		want := fmt.Sprintf("cexecd is not running at %s (connect: no such file or directory); start it with: cexecd -config cexec.hcl -socket %s", s.sock, s.sock)
		if code != 3 || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr %q; want 3 and %q", code, errOut, want)
		}
		out, _, code := ctl(t, s, "version", "--json")
		if code != 0 || !strings.Contains(out, `"daemon_error"`) {
			t.Errorf("version without a daemon: exit %d\n%s", code, out)
		}
	})
}

// TestBenchStart runs the measurement command briefly, so the figures it
// reports come from a command that works.
func TestBenchStart(t *testing.T) {
	s := newSetup(t)
	cmd := exec.Command(filepath.Join(bins.dir, "cexecctl"), "bench", "start", "--config", s.config, "--n", "2", "--idle", "300ms", "--json")
	cmd.Env = append(os.Environ(), "CEXEC_E2E_SECRET="+secret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	var r struct {
		N       int `json:"n"`
		ReadyMs struct {
			P50 float64 `json:"p50"`
		} `json:"ready_ms"`
		IdleRSSMiB struct {
			P50 float64 `json:"p50"`
		} `json:"idle_rss_mib"`
		IdleCPU struct {
			P50 *float64 `json:"p50"`
		} `json:"idle_cpu_ms_per_s"`
		Runs []struct {
			PluginsOK    int `json:"plugins_ok"`
			PluginsTotal int `json:"plugins_total"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if r.N != 2 || len(r.Runs) != 2 || r.ReadyMs.P50 <= 0 || r.IdleRSSMiB.P50 <= 0 || r.IdleCPU.P50 == nil || *r.IdleCPU.P50 < 0 {
		t.Fatalf("bench result: %s", stdout.String())
	}
	for _, run := range r.Runs {
		if run.PluginsOK != 1+len(bins.plugins) || run.PluginsTotal != run.PluginsOK {
			t.Errorf("run had %d/%d plugins ok", run.PluginsOK, run.PluginsTotal)
		}
	}
	t.Logf("start->ready p50 %.1f ms, idle rss p50 %.1f MiB (%d plugins)", r.ReadyMs.P50, r.IdleRSSMiB.P50, 1+len(bins.plugins))
}

// unmountUnder detaches every mount below dir: the tenant images of a
// cexecd that was killed. The loop devices free themselves once the
// sandboxes holding them are gone.
func unmountUnder(t *testing.T, dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			if err := syscall.Unmount(f[4], syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", f[4], err)
			}
		}
	}
}
