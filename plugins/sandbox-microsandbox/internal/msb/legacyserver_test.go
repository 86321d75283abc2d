package msb

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cexec/cexec/internal/testutil"
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
// environment arguments) and as working directory. As each real sandbox
// is a VM with a file system of its own, each one here gets its own host
// folder for guest_dir/run of the configs the server handed out, so that
// sandboxes of one plugin never share the relay's control pipes (a new
// sandbox's launch replaced a running one's, and its ready frame could be
// read by the other's relay).
type legacyServer struct {
	srv *httptest.Server
	key string

	mu        sync.Mutex
	guestDirs []string
	sandboxes map[string]*legacySandbox
	started   bool
	methods   []string
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

// rpcParams are the params of every method the fake server answers.
type rpcParams struct {
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

func (s *legacyServer) rpc(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
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
	var p rpcParams
	_ = json.Unmarshal(req.Params, &p)
	ok := func(result any) {
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "result": result, "id": req.ID})
	}
	switch req.Method {
	case "sandbox.start":
		s.start(w, &p, ok)
	case "sandbox.stop":
		s.stop(w, &p, ok)
	case "sandbox.metrics.get":
		s.metrics(w, &p, ok)
	case "sandbox.command.run", "sandbox.repl.run":
		s.run(w, req.Method, &p, ok)
	default:
		rpcError(w, http.StatusNotFound, req.ID, -32601, "Method not found: "+req.Method)
	}
}

// authorized checks the Bearer token as the 0.2 server does, answering
// with its error when it is wrong.
func (s *legacyServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		serverError(w, http.StatusUnauthorized, "Invalid credentials", 1001)
		return false
	}
	token := strings.TrimPrefix(auth, "Bearer ")
	switch {
	case !strings.HasPrefix(token, "msb_"):
		serverError(w, http.StatusUnauthorized, "Invalid credentials", 1001)
		return false
	case token != s.key:
		serverError(w, http.StatusUnauthorized, "Invalid or expired token", 1004)
		return false
	}
	return true
}

// start is sandbox.start.
func (s *legacyServer) start(w http.ResponseWriter, p *rpcParams, ok func(any)) {
	if msg := validName(p.Sandbox); msg != "" {
		serverError(w, http.StatusBadRequest, msg, 2001)
		return
	}
	if p.Config == nil || p.Config.Image == nil {
		serverError(w, http.StatusBadRequest, fmt.Sprintf("No configuration provided and no existing configuration found for sandbox '%s'", p.Sandbox), 2001)
		return
	}
	sb := &legacySandbox{name: p.Sandbox, volumes: map[string]string{}, envs: p.Config.Envs, memory: p.Config.Memory, procs: map[*exec.Cmd]bool{}}
	s.mu.Lock()
	for _, g := range s.guestDirs {
		sb.volumes[g+"/run"] = g + "/run.vm-" + p.Sandbox
	}
	s.mu.Unlock()
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
}

// stop is sandbox.stop.
func (s *legacyServer) stop(w http.ResponseWriter, p *rpcParams, ok func(any)) {
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
}

// metrics is sandbox.metrics.get.
func (s *legacyServer) metrics(w http.ResponseWriter, p *rpcParams, ok func(any)) {
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
}

// run is sandbox.command.run and sandbox.repl.run.
func (s *legacyServer) run(w http.ResponseWriter, method string, p *rpcParams, ok func(any)) {
	s.mu.Lock()
	sb := s.sandboxes[p.Sandbox]
	s.mu.Unlock()
	if sb == nil {
		// No portal port assigned for the sandbox.
		internalError(w)
		return
	}
	if method == "sandbox.repl.run" {
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
	if g, ok := c["guest_dir"].(string); ok {
		s.mu.Lock()
		s.guestDirs = append(s.guestDirs, g)
		s.mu.Unlock()
	}
	return c
}
