package msb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// legacyServer is a protocol-level stand-in for a 0.2-era `msb server`
// and the portal inside its sandboxes, written from microsandbox 0.2's
// server and portal sources: JSON-RPC 2.0 at /api/v1/rpc behind Bearer
// auth, its two error shapes and status codes, sandbox.command.run
// running commands concurrently with stdin closed and answering with
// their output lines when they end, sandbox.repl.run feeding a `python3
// -i` REPL line by line up to an end marker. There is no VM: commands run
// on this machine, with the guest paths of the sandbox's volumes
// rewritten to their host paths in arguments (plain paths and KEY=paths
// environment arguments) and as working directory.
type legacyServer struct {
	srv *httptest.Server
	key string

	mu        sync.Mutex
	sandboxes map[string]*legacySandbox
	started   bool
	methods   []string
}

type legacySandbox struct {
	name    string
	volumes map[string]string // guest path -> host path
	envs    []string
	memory  int64

	mu    sync.Mutex
	procs map[*exec.Cmd]bool
	repl  *legacyREPL
}

func newLegacyServer(t testing.TB) *legacyServer {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		testutil.SkipMissing(t, "no %s to run commands with", python)
	}
	s := &legacyServer{key: "msb_test-key-" + strconv.Itoa(os.Getpid()), sandboxes: map[string]*legacySandbox{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": "Service is healthy"})
	})
	mux.HandleFunc("POST /api/v1/rpc", s.rpc)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sb := range s.sandboxes {
			sb.kill()
		}
	})
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serverError answers in the server's own error shape.
func serverError(w http.ResponseWriter, status int, msg string, code int) {
	writeJSON(w, status, map[string]any{"error": msg, "code": code})
}

func rpcError(w http.ResponseWriter, status int, id any, code int, msg string) {
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "error": map[string]any{"code": code, "message": msg}, "id": id})
}

func internalError(w http.ResponseWriter) {
	serverError(w, http.StatusInternalServerError, "Internal server error", 5002)
}

var nameChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func (s *legacyServer) rpc(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		serverError(w, http.StatusUnauthorized, "Invalid credentials", 1001)
		return
	}
	token := strings.TrimPrefix(auth, "Bearer ")
	switch {
	case !strings.HasPrefix(token, "msb_"):
		serverError(w, http.StatusUnauthorized, "Invalid credentials", 1001)
		return
	case token != s.key:
		serverError(w, http.StatusUnauthorized, "Invalid or expired token", 1004)
		return
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		ID      any             `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "Failed to parse the request body as JSON", http.StatusBadRequest)
		return
	}
	if req.JSONRPC != "2.0" {
		rpcError(w, http.StatusBadRequest, req.ID, -32600, "Invalid or missing jsonrpc version field")
		return
	}
	s.mu.Lock()
	s.methods = append(s.methods, req.Method)
	s.mu.Unlock()
	var p struct {
		Sandbox string `json:"sandbox"`
		Config  *struct {
			Image   *string  `json:"image"`
			Memory  int64    `json:"memory"`
			Volumes []string `json:"volumes"`
			Envs    []string `json:"envs"`
		} `json:"config"`
		Command  string   `json:"command"`
		Args     []string `json:"args"`
		Timeout  int64    `json:"timeout"`
		Code     string   `json:"code"`
		Language string   `json:"language"`
	}
	_ = json.Unmarshal(req.Params, &p)
	ok := func(result any) {
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "result": result, "id": req.ID})
	}
	switch req.Method {
	case "sandbox.start":
		if msg := validName(p.Sandbox); msg != "" {
			serverError(w, http.StatusBadRequest, msg, 2001)
			return
		}
		if p.Config == nil || p.Config.Image == nil {
			serverError(w, http.StatusBadRequest, fmt.Sprintf("No configuration provided and no existing configuration found for sandbox '%s'", p.Sandbox), 2001)
			return
		}
		sb := &legacySandbox{name: p.Sandbox, volumes: map[string]string{}, envs: p.Config.Envs, memory: p.Config.Memory, procs: map[*exec.Cmd]bool{}}
		for _, v := range p.Config.Volumes {
			host, guest, found := strings.Cut(v, ":")
			if !found {
				guest = host
			}
			sb.volumes[guest] = host
		}
		s.mu.Lock()
		s.sandboxes[p.Sandbox] = sb
		s.started = true
		s.mu.Unlock()
		ok(fmt.Sprintf("Sandbox %s started successfully", p.Sandbox))
	case "sandbox.stop":
		s.mu.Lock()
		sb := s.sandboxes[p.Sandbox]
		delete(s.sandboxes, p.Sandbox)
		s.mu.Unlock()
		if sb == nil {
			internalError(w)
			return
		}
		sb.kill()
		ok(fmt.Sprintf("Sandbox %s stopped successfully", p.Sandbox))
	case "sandbox.metrics.get":
		s.mu.Lock()
		started := s.started
		var list []map[string]any
		for _, sb := range s.sandboxes {
			if p.Sandbox == "" || p.Sandbox == sb.name {
				list = append(list, map[string]any{"name": sb.name, "running": true, "cpu_usage": 0.5, "memory_usage": sb.rss() >> 20, "disk_usage": 0})
			}
		}
		s.mu.Unlock()
		if !started {
			// No project directory before the first sandbox.
			internalError(w)
			return
		}
		ok(map[string]any{"sandboxes": list})
	case "sandbox.command.run", "sandbox.repl.run":
		s.mu.Lock()
		sb := s.sandboxes[p.Sandbox]
		s.mu.Unlock()
		if sb == nil {
			// No portal port assigned for the sandbox.
			internalError(w)
			return
		}
		if req.Method == "sandbox.repl.run" {
			if p.Language != "python" {
				internalError(w)
				return
			}
			lines, err := sb.replRun(p.Code, p.Timeout)
			if err != nil {
				internalError(w)
				return
			}
			ok(map[string]any{"status": "success", "language": p.Language, "output": lines})
			return
		}
		code, lines, err := sb.command(p.Command, p.Args, p.Timeout)
		if err != nil {
			internalError(w)
			return
		}
		ok(map[string]any{"command": p.Command, "args": p.Args, "exit_code": code, "success": code == 0, "output": lines})
	default:
		rpcError(w, http.StatusNotFound, req.ID, -32601, "Method not found: "+req.Method)
	}
}

// validName applies the 0.2 server's sandbox name rules.
func validName(n string) string {
	switch {
	case n == "":
		return "Sandbox name cannot be empty"
	case len(n) > 63:
		return "Sandbox name cannot exceed 63 characters"
	case !nameChars.MatchString(n):
		return "Sandbox name can only contain alphanumeric characters, hyphens, or underscores"
	}
	return ""
}

var envArg = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// guestPath rewrites a guest path under one of the volumes.
func (sb *legacySandbox) guestPath(p string) string {
	for guest, host := range sb.volumes {
		if p == guest || strings.HasPrefix(p, guest+"/") {
			return host + strings.TrimPrefix(p, guest)
		}
	}
	return p
}

func (sb *legacySandbox) arg(a string) string {
	if loc := envArg.FindStringIndex(a); loc != nil {
		parts := strings.Split(a[loc[1]:], ":")
		for i, x := range parts {
			parts[i] = sb.guestPath(x)
		}
		return a[:loc[1]] + strings.Join(parts, ":")
	}
	if strings.HasPrefix(a, "/") {
		return sb.guestPath(a)
	}
	return a
}

type line struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// command runs one command as the portal does: stdin closed, output
// collected line by line, killed after timeout seconds.
func (sb *legacySandbox) command(name string, args []string, timeout int64) (int, []line, error) {
	for i, a := range args {
		args[i] = sb.arg(a)
	}
	if name == "python3" {
		name = python
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, sb.envs...)
	if ws, ok := sb.volumes[guestWorkspace]; ok {
		cmd.Dir = ws
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	sb.track(cmd, true)
	defer sb.track(cmd, false)
	var mu sync.Mutex
	var lines []line
	var wg sync.WaitGroup
	for stream, r := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 64<<20)
			for sc.Scan() {
				mu.Lock()
				lines = append(lines, line{stream, sc.Text()})
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	var limit <-chan time.Time
	if timeout > 0 {
		limit = time.After(time.Duration(timeout) * time.Second)
	}
	select {
	case <-done:
	case <-limit:
		killTree(cmd.Process.Pid)
		<-done
		_ = cmd.Wait()
		return 0, nil, errors.New("command timed out")
	}
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if code < 0 {
			code = 1
		}
	}
	return code, lines, nil
}

func (sb *legacySandbox) track(cmd *exec.Cmd, on bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if on {
		sb.procs[cmd] = true
	} else {
		delete(sb.procs, cmd)
	}
}

// kill ends everything the sandbox runs, as the VM's end does.
func (sb *legacySandbox) kill() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for cmd := range sb.procs {
		killTree(cmd.Process.Pid)
	}
	if sb.repl != nil {
		killTree(sb.repl.cmd.Process.Pid)
	}
}

// rss sums the resident memory of the sandbox's processes.
func (sb *legacySandbox) rss() int64 {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var total int64
	for cmd := range sb.procs {
		for _, pid := range append(descendants(cmd.Process.Pid), cmd.Process.Pid) {
			data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
			if err != nil {
				continue
			}
			if f := strings.Fields(string(data)); len(f) > 1 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				total += n * int64(os.Getpagesize())
			}
		}
	}
	return total
}

// legacyREPL is the portal's Python engine: one `python3 -i` per sandbox.
type legacyREPL struct {
	cmd   *exec.Cmd
	stdin io.Writer
	lines chan line
	mu    sync.Mutex
}

func (sb *legacySandbox) replRun(code string, timeout int64) ([]line, error) {
	sb.mu.Lock()
	if sb.repl == nil {
		cmd := exec.Command(python, "-q", "-u", "-i", "-c", "import sys; sys.ps1=sys.ps2=''")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, sb.envs...)
		if ws, ok := sb.volumes[guestWorkspace]; ok {
			cmd.Dir = ws
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			sb.mu.Unlock()
			return nil, err
		}
		r := &legacyREPL{cmd: cmd, stdin: stdin, lines: make(chan line, 1024)}
		for stream, rd := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
			go func() {
				sc := bufio.NewScanner(rd)
				sc.Buffer(make([]byte, 64<<10), 64<<20)
				for sc.Scan() {
					r.lines <- line{stream, sc.Text()}
				}
			}()
		}
		sb.repl = r
	}
	r := sb.repl
	sb.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	marker := fmt.Sprintf("eoe_%d", time.Now().UnixNano())
	if !strings.HasSuffix(code, "\n") {
		code += "\n"
	}
	if _, err := io.WriteString(r.stdin, code+"\nprint('"+marker+"')\n"); err != nil {
		return nil, err
	}
	var limit <-chan time.Time
	if timeout > 0 {
		limit = time.After(time.Duration(timeout) * time.Second)
	}
	var out []line
	for {
		select {
		case l := <-r.lines:
			if l.Stream == "stdout" && strings.TrimSpace(l.Text) == marker {
				// Let stderr written just before catch up.
				time.Sleep(20 * time.Millisecond)
				for {
					select {
					case l := <-r.lines:
						out = append(out, l)
					default:
						return out, nil
					}
				}
			}
			out = append(out, l)
		case <-limit:
			return nil, errors.New("execution timed out")
		}
	}
}

// killTree kills pid and every process below it.
func killTree(pid int) {
	for _, c := range descendants(pid) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func (s *legacyServer) called(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (s *legacyServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sandboxes)
}

// config is the plugin's server mode configuration for s.
func (s *legacyServer) config(t testing.TB, extra map[string]any) json.RawMessage {
	b, _ := json.Marshal(s.configMap(t, extra))
	return b
}

func (s *legacyServer) configMap(t testing.TB, extra map[string]any) map[string]any {
	c := map[string]any{"api": "server", "url": s.srv.URL, "api_key": s.key, "accept_network": true,
		"guest_dir": filepath.Join(t.TempDir(), "guest"), "python": python, "exec_timeout": "20s"}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func TestLegacyServer_Config(t *testing.T) {
	tests := []struct {
		name, config, attr, want string
	}{
		{"no url", `{"api":"server","accept_network":true}`, "url", "Missing url"},
		{"bad url", `{"api":"server","url":"ftp://x","accept_network":true}`, "url", "Invalid url"},
		{"credentials in the url", `{"api":"server","url":"http://u:p@x","accept_network":true}`, "url", "Invalid url"},
		{"network not accepted", `{"api":"server","url":"http://x"}`, "accept_network", "Server mode cannot turn networking off"},
		{"bad guest_dir", `{"api":"server","url":"http://x","accept_network":true,"guest_dir":"tmp/x"}`, "guest_dir", "Invalid guest_dir"},
		{"bad server_exec", `{"api":"server","url":"http://x","accept_network":true,"server_exec":"ssh"}`, "server_exec", "Invalid server_exec"},
		{"CLI attribute", `{"api":"server","url":"http://x","accept_network":true,"msb":"/bin/msb"}`, "msb", "Attribute of CLI mode"},
		{"server attribute in CLI mode", `{"url":"http://x"}`, "url", "Attribute of server mode"},
		{"bad api", `{"api":"grpc"}`, "api", "Invalid api"},
		{"bad timeout", `{"exec_timeout":"soon"}`, "exec_timeout", "Invalid exec_timeout"},
		{"too little memory", `{"memory_mb":64}`, "memory_mb", "Invalid memory_mb"},
		{"bad preload", `{"preload":["os.path","x-y"]}`, "preload", "Invalid preload module"},
		{"unknown attribute", `{"mystery":1}`, "mystery", "Unsupported attribute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := decodeConfig(json.RawMessage(tc.config))
			if !diags.HasErrors() || diags[0].Attribute != tc.attr || diags[0].Summary != tc.want {
				t.Errorf("diagnostics %+v, want %q on %q", diags, tc.want, tc.attr)
			}
		})
	}
	s, diags := decodeConfig(json.RawMessage(`{"api":"server","url":"http://127.0.0.1:5555/","api_key":"k","accept_network":true}`))
	if diags.HasErrors() || s.url != "http://127.0.0.1:5555" || s.image != defaultServerImage || s.python != defaultServerPy || s.guestDir != defaultGuestDir || s.serverExec != serverExecRelay {
		t.Errorf("server defaults %+v %v", s, diags)
	}
}

func TestLegacyServer_Capabilities(t *testing.T) {
	ls := newLegacyServer(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	tests := []struct {
		name   string
		extra  map[string]any
		reason string
	}{
		{name: "reachable"},
		{name: "wrong key", extra: map[string]any{"api_key": "msb_wrong"}, reason: "msb server sandbox.metrics.get: HTTP 401, error code 1004: Invalid or expired token: check api_key"},
		{name: "no key", extra: map[string]any{"api_key": ""}, reason: "HTTP 401, error code 1001: Invalid credentials"},
		{name: "server down", extra: map[string]any{"url": downURL}, reason: "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			impl := New(nil)
			defer impl.Close()
			sb := plugintest.Sandbox(t, impl)
			diags, err := sb.Configure(t.Context(), ls.config(t, tc.extra), sandbox.APIVersion)
			if err != nil || diags.HasErrors() {
				t.Fatalf("configure: %v %v", diags, err)
			}
			caps, err := sb.Capabilities(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !caps.Network || caps.Isolation != "microvm" {
				t.Errorf("capabilities %+v", caps)
			}
			if tc.reason == "" {
				if !caps.Available || len(diags) != 0 {
					t.Errorf("capabilities %+v diagnostics %v", caps, diags)
				}
				return
			}
			if caps.Available || !strings.HasPrefix(caps.UnavailableReason, unavailablePrefix) || !strings.Contains(caps.UnavailableReason, tc.reason) {
				t.Errorf("reason %q, want …%q", caps.UnavailableReason, tc.reason)
			}
			if len(diags) != 1 || diags[0].Severity != pluginapi.SeverityWarning || diags[0].Attribute != "url" {
				t.Errorf("diagnostics %+v", diags)
			}
			if strings.Contains(caps.UnavailableReason, "msb_wrong") || strings.Contains(caps.UnavailableReason, ls.key) {
				t.Errorf("the api key leaked into %q", caps.UnavailableReason)
			}
		})
	}
}

// TestLegacyServer_ErrorShapes checks that each of the server's error
// shapes reaches the caller with its meaning.
func TestLegacyServer_ErrorShapes(t *testing.T) {
	ls := newLegacyServer(t)
	c := &rpcClient{url: ls.srv.URL, key: ls.key, hc: ls.srv.Client()}
	ctx := t.Context()
	tests := []struct {
		name     string
		call     func() error
		sentinel error
		want     string
	}{
		{"unknown method", func() error { return c.call(ctx, "sandbox.fly", struct{}{}, nil) }, pluginapi.ErrUnimplemented,
			"msb server sandbox.fly: HTTP 404, JSON-RPC error -32601: Method not found: sandbox.fly: is this a 0.2 msb server?"},
		{"invalid name", func() error { _, err := c.start(ctx, "no/slashes", startConfig{Image: "x"}); return err }, pluginapi.ErrInvalidArgument,
			"HTTP 400, error code 2001: Sandbox name can only contain alphanumeric characters, hyphens, or underscores"},
		{"no image", func() error { return c.call(ctx, "sandbox.start", map[string]string{"sandbox": "x"}, nil) }, pluginapi.ErrInvalidArgument,
			"No configuration provided and no existing configuration found for sandbox 'x'"},
		{"no such sandbox", func() error { _, err := c.command(ctx, "ghost", "true", nil, 0); return err }, nil,
			"msb server sandbox.command.run: HTTP 500, error code 5002: Internal server error"},
		{"no key", func() error {
			return (&rpcClient{url: ls.srv.URL, hc: ls.srv.Client()}).stop(ctx, "x")
		}, pluginapi.ErrDenied, "HTTP 401, error code 1001: Invalid credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var se *ServerError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a *ServerError with %q", err, tc.want)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v is not %v", err, tc.sentinel)
			}
		})
	}
}

func TestLegacyServer_Relay(t *testing.T) {
	ls := newLegacyServer(t)
	_, sb := configured(t, ls.config(t, nil))
	servers, skills := stubTree(t)
	id, ws := create(t, sb, sandbox.Limits{},
		sandbox.Mount{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		sandbox.Mount{Source: skills, Target: "/cexec/skills", ReadOnly: true})
	checkCases(t, sb, id, append(append([]execCase{}, commonCases...), callCases...))
	if got, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(got) != "hi" {
		t.Errorf("workspace file on the host: %q %v", got, err)
	}
	t.Run("stubs are copies", func(t *testing.T) {
		// The server cannot mount read-only: a program that writes over a
		// stub changes its sandbox's copy, never the host's tree.
		res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "import servers.filesystem as f\nopen(f.__file__, 'a').write('# changed\\n')\nprint('ok')"}, nil)
		if res.ExitCode != 0 {
			t.Fatalf("result %+v %+v", res, res.Error)
		}
		data, _ := os.ReadFile(filepath.Join(servers, "filesystem", "__init__.py"))
		if strings.Contains(string(data), "changed") {
			t.Errorf("the host's stub tree was changed")
		}
	})
	t.Run("persistent", func(t *testing.T) {
		for i, want := range []string{"1\n", "2\n"} {
			h := &plugintest.Host{}
			run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "n = globals().get('n', 0) + 1\nprint(n)", Persistent: true, Session: "s"}, h)
			if h.Stdout() != want {
				t.Fatalf("run %d: %q", i, h.Stdout())
			}
		}
	})
	t.Run("large program and output", func(t *testing.T) {
		h := &plugintest.Host{}
		code := "x = '" + strings.Repeat("a", 700<<10) + "'\nprint(len(x))\nprint('y' * 300000)"
		res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: code}, h)
		if res.ExitCode != 0 || h.Stdout() != strconv.Itoa(700<<10)+"\n"+strings.Repeat("y", 300000)+"\n" {
			t.Errorf("result %+v, %d bytes of stdout", res, len(h.Stdout()))
		}
	})
	t.Run("list and health", func(t *testing.T) {
		list, err := sb.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != id || list[0].State != "ready" || list[0].RSSBytes < 1<<20 {
			t.Errorf("list %+v", list)
		}
		if err := sb.Health(t.Context(), id); err != nil {
			t.Errorf("health: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		id, _ := create(t, sb, sandbox.Limits{Timeout: time.Second})
		res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "while True:\n    pass"}, nil)
		if !res.TimedOut || res.Error == nil || res.Error.Type != "Timeout" || res.SandboxOK {
			t.Errorf("result %+v (error %+v)", res, res.Error)
		}
	})
	t.Run("crash", func(t *testing.T) {
		id, _ := create(t, sb, sandbox.Limits{})
		h := newStartedHost()
		go func() {
			<-h.started
			c := &rpcClient{url: ls.srv.URL, key: ls.key, hc: http.DefaultClient}
			_ = c.stop(context.Background(), serverName(id))
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: "import time\nprint('started', flush=True)\ntime.sleep(30)"}, h)
		if err != nil {
			t.Fatal(err)
		}
		if res.SandboxOK || res.Error == nil || res.Error.Type != "Killed" {
			t.Errorf("result %+v (error %+v)", res, res.Error)
		}
		if err := sb.Health(t.Context(), id); err == nil {
			t.Errorf("a stopped sandbox is healthy")
		}
	})
	t.Run("cleanup", func(t *testing.T) {
		before := ls.count()
		id := newID()
		if _, err := sb.Create(t.Context(), sandbox.CreateRequest{ID: id, Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}}); err != nil {
			t.Fatal(err)
		}
		if ls.count() != before+1 {
			t.Fatalf("%d sandboxes on the server, want %d", ls.count(), before+1)
		}
		stops := ls.called("sandbox.stop")
		if err := sb.Destroy(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if ls.count() != before || ls.called("sandbox.stop") != stops+1 {
			t.Errorf("after destroy: %d sandboxes, %d stops", ls.count(), ls.called("sandbox.stop")-stops)
		}
	})
}

func TestLegacyServer_REPL(t *testing.T) {
	ls := newLegacyServer(t)
	_, sb := configured(t, ls.config(t, map[string]any{"server_exec": "repl"}))
	caps, err := sb.Capabilities(t.Context())
	if err != nil || !caps.Available || !caps.PersistentInterpreter {
		t.Errorf("capabilities %+v %v", caps, err)
	}
	servers, skills := stubTree(t)
	id, _ := create(t, sb, sandbox.Limits{Timeout: 20 * time.Second},
		sandbox.Mount{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		sandbox.Mount{Source: skills, Target: "/cexec/skills", ReadOnly: true})
	cases := append(append([]execCase{}, commonCases...),
		execCase{name: "call_tool refused", code: "from servers.filesystem import read_text_file\ntry:\n    read_text_file(path='/a')\nexcept Exception as e:\n    print(type(e).__name__, 'server_exec = \"relay\"' in str(e))", stdout: "ToolError True\n"})
	checkCases(t, sb, id, cases)
	if ls.called("sandbox.repl.run") < len(cases) {
		t.Errorf("sandbox.repl.run called %d times", ls.called("sandbox.repl.run"))
	}
	if err := sb.Health(t.Context(), id); err != nil {
		t.Errorf("health: %v", err)
	}
	t.Run("persistent", func(t *testing.T) {
		for i, want := range []string{"1\n", "2\n", "1\n"} {
			h := &plugintest.Host{}
			session := "s"
			if i == 2 {
				session = "other"
			}
			run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "n = globals().get('n', 0) + 1\nprint(n)", Persistent: true, Session: session}, h)
			if h.Stdout() != want {
				t.Fatalf("run %d: %q, want %q", i, h.Stdout(), want)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "import time\ntime.sleep(30)", Timeout: time.Second}, nil)
		if !res.TimedOut || res.Error == nil || res.Error.Type != "Timeout" || res.SandboxOK {
			t.Errorf("result %+v (error %+v)", res, res.Error)
		}
		if err := sb.Health(t.Context(), id); err == nil {
			t.Errorf("a REPL stuck in a program is healthy")
		}
	})
}
