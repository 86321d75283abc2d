// Command client is the harness the official MCP conformance suite runs as
// its client under test (`conformance client --command <this>`): it drives
// cexec as a user would. It writes a cexec.hcl whose only mcp_server is the
// scenario's URL (with an oauth block for auth scenarios), starts cexecd,
// signs in with `cexecctl auth login` where the server asks for it —
// following the authorization URL without a browser, since the suite's
// authorization servers approve without a user — and calls the server's
// tools from sandboxed code with `cexecctl exec --ask`, answering what cexecd
// asks as a user at the terminal would: accepting forms with their fields'
// defaults, opening a sign-in link it is shown.
//
// The suite appends the server URL as the last argument and sets
// MCP_CONFORMANCE_SCENARIO (and, for some scenarios, MCP_CONFORMANCE_CONTEXT,
// JSON with pre-registered client credentials). CEXEC_BIN_DIR is the folder
// with cexecd, cexecctl and the plugin binaries (default ./bin). Exit 0 when
// every call succeeded.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// maxSignIns bounds sign-ins per run: a server that keeps asking for more
// scope gets no more than this, never a loop.
const maxSignIns = 3

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		os.Exit(1)
	}
}

type harness struct {
	bin, dir, sock string
	scenario       string
	daemon         *exec.Cmd
	exited         chan struct{}
	log            *os.File
}

func run() error {
	if len(os.Args) < 2 {
		return errors.New("usage: client [args...] SERVER_URL")
	}
	url := os.Args[len(os.Args)-1]
	h := &harness{bin: os.Getenv("CEXEC_BIN_DIR"), scenario: os.Getenv("MCP_CONFORMANCE_SCENARIO")}
	if h.bin == "" {
		h.bin = "bin"
	}
	var err error
	if h.bin, err = filepath.Abs(h.bin); err != nil {
		return err
	}
	// Short: unix socket paths are limited to 108 bytes.
	if h.dir, err = os.MkdirTemp("", "cexec-conf-"); err != nil {
		return err
	}
	defer os.RemoveAll(h.dir)
	h.sock = filepath.Join(h.dir, "cexecd.sock")
	env, err := h.writeConfig(url)
	if err != nil {
		return err
	}
	if err := h.start(env); err != nil {
		h.dumpLog()
		return err
	}
	defer h.stop()
	err = h.drive()
	if err != nil {
		h.dumpLog()
	}
	return err
}

// writeConfig writes cexec.hcl and returns the environment cexecd needs
// for it (client credentials are read with env(), as a user would write
// them).
func (h *harness) writeConfig(url string) ([]string, error) {
	env := os.Environ()
	var oauth string
	if strings.HasPrefix(h.scenario, "auth/") {
		var ctx struct {
			ClientID     string `json:"client_id"`
			ClientSecret string `json:"client_secret"`
			PrivateKey   string `json:"private_key_pem"`
		}
		if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
			if err := json.Unmarshal([]byte(raw), &ctx); err != nil {
				return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
			}
		}
		var b strings.Builder
		b.WriteString("  oauth {\n")
		// The client ID metadata document the suite expects cexec to name
		// where the authorization server supports them.
		b.WriteString("    client_metadata_url = \"https://conformance-test.local/client-metadata.json\"\n")
		if ctx.ClientID != "" {
			b.WriteString("    client_id = env(\"CONF_CLIENT_ID\")\n")
			env = append(env, "CONF_CLIENT_ID="+ctx.ClientID)
		}
		if ctx.ClientSecret != "" {
			b.WriteString("    client_secret = env(\"CONF_CLIENT_SECRET\")\n")
			env = append(env, "CONF_CLIENT_SECRET="+ctx.ClientSecret)
		}
		if ctx.PrivateKey != "" {
			b.WriteString("    client_assertion_key = env(\"CONF_CLIENT_KEY\")\n")
			env = append(env, "CONF_CLIENT_KEY="+ctx.PrivateKey)
		}
		if strings.HasPrefix(h.scenario, "auth/client-credentials") {
			// Machine to machine: no user, no sign-in.
			b.WriteString("    grant = \"client_credentials\"\n")
		}
		b.WriteString("  }\n")
		oauth = b.String()
	}
	cfg := fmt.Sprintf(`cexec {
  data_dir   = %q
  socket     = %q
  plugin_dir = %q
  log_level  = "debug"
}

plugin "sandbox" "bwrap" {}

# The scenarios' outputs hold no PII; no guard plugin keeps start-up short.
pipeline {
  guards = []
}

sandbox {
  backend = "bwrap"
  pool {
    warm = 1
  }
}

mcp_server "conf" {
  url      = %q
  optional = true
%s}
`, filepath.Join(h.dir, "data"), h.sock, h.bin, url, oauth)
	return env, os.WriteFile(filepath.Join(h.dir, "cexec.hcl"), []byte(cfg), 0o600)
}

func (h *harness) start(env []string) error {
	var err error
	if h.log, err = os.Create(filepath.Join(h.dir, "cexecd.log")); err != nil {
		return err
	}
	h.daemon = exec.Command(filepath.Join(h.bin, "cexecd"), "-config", filepath.Join(h.dir, "cexec.hcl"))
	h.daemon.Env = env
	h.daemon.Stdout, h.daemon.Stderr = h.log, h.log
	if err := h.daemon.Start(); err != nil {
		return fmt.Errorf("start cexecd: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = h.daemon.Wait(); close(exited) }()
	h.exited = exited
	for range 300 {
		if _, err := h.ctl(context.Background(), "status"); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("cexecd exited: %v", h.daemon.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("cexecd did not come up in 15s")
}

func (h *harness) stop() {
	if h.daemon == nil || h.daemon.Process == nil {
		return
	}
	_ = h.daemon.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		_ = h.daemon.Process.Kill()
		<-h.exited
	}
}

func (h *harness) dumpLog() {
	if h.log == nil {
		return
	}
	b, _ := os.ReadFile(h.log.Name())
	if len(b) > 20000 {
		b = b[len(b)-20000:]
	}
	fmt.Fprintf(os.Stderr, "--- cexecd log (tail) ---\n%s\n", b)
}

// ctl runs cexecctl and returns its stdout; a non-zero exit is an error
// carrying stderr.
func (h *harness) ctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, "cexecctl"), args...)
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+h.sock)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("cexecctl %s: %w: %s%s", strings.Join(args, " "), err, errOut.String(), out.String())
	}
	return out.String(), nil
}

// drive waits for the server, signing in when it asks, then calls its
// tools from sandboxed code, signing in again (with the scope the server
// now asks for) when a call is refused for want of scope.
func (h *harness) drive() error {
	signIns := 0
	signIn := func() error {
		if signIns >= maxSignIns {
			return fmt.Errorf("the server still refuses after %d sign-ins; giving up rather than loop", signIns)
		}
		signIns++
		return h.login()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := h.server()
		if err != nil {
			return err
		}
		if st.State == "ok" {
			break
		}
		if strings.Contains(st.LastError, "needs a sign-in") {
			if err := signIn(); err != nil {
				return err
			}
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server conf did not connect: %s", st.LastError)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tools, err := h.tools()
	if err != nil {
		return err
	}
	if len(tools) == 0 {
		fmt.Println("connected; the server lists no tools")
	}
	for _, t := range tools {
		for {
			out, err := h.call(t)
			if err != nil && strings.Contains(err.Error(), "needs a sign-in") {
				if err := signIn(); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			fmt.Printf("%s: %s", t, out)
			break
		}
	}
	return nil
}

type serverState struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	LastError string `json:"last_error"`
}

// server polls the conf server's state until it is ready or failed.
func (h *harness) server() (*serverState, error) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, err := h.ctl(context.Background(), "servers", "ls", "--json")
		if err != nil {
			return nil, err
		}
		var r struct {
			Servers []serverState `json:"servers"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return nil, fmt.Errorf("servers ls: %w", err)
		}
		for _, s := range r.Servers {
			if s.Name == "conf" && (s.State == "ok" || s.State == "failed") {
				return &s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, errors.New("server conf neither ready nor failed after 20s")
}

// login runs `cexecctl auth login conf`, opening the URL it prints the way
// a browser would: the suite's authorization server redirects at once to
// cexecd's loopback listener.
func (h *harness) login() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, "cexecctl"), "auth", "login", "conf", "--json")
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+h.sock)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		return err
	}
	var rest bytes.Buffer
	dec := json.NewDecoder(bufio.NewReader(stdout))
	var first map[string]any
	if err := dec.Decode(&first); err != nil {
		_ = cmd.Wait()
		return fmt.Errorf("auth login: %v: %s", err, errOut.String())
	}
	if u, ok := first["authorization_url"].(string); ok {
		if err := browse(ctx, u); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return err
		}
	}
	_, _ = io.Copy(&rest, dec.Buffered())
	_, _ = io.Copy(&rest, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("auth login: %w: %s", err, errOut.String())
	}
	return nil
}

// browse follows the authorization URL and its redirects to the end, as a
// browser whose user approves would.
func browse(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("open the authorization URL: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the sign-in ended with HTTP %d: %s", resp.StatusCode, body)
	}
	return nil
}

// tools lists the conf server's tools.
func (h *harness) tools() ([]string, error) {
	out, err := h.ctl(context.Background(), "tools", "ls", "conf", "--json")
	if err != nil {
		return nil, err
	}
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("tools ls: %w", err)
	}
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

// argsFor are the arguments the scenarios' tools need.
var argsFor = map[string]string{
	"add_numbers": `{"a": 2, "b": 3}`,
}

// call calls tool from sandboxed code under `cexecctl exec --ask`, with
// this harness as the user at the terminal (answer).
func (h *harness) call(tool string) (string, error) {
	args := argsFor[tool]
	if args == "" {
		args = "{}"
	}
	code := fmt.Sprintf("import cexec, json\nres = cexec.call_tool(%q, %q, json.loads(%q))\nprint(repr(res)[:200])\n", "conf", tool, args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, "cexecctl"), "exec", "--ask", "-c", code)
	cmd.Env = append(os.Environ(), "CEXECD_ADDRESS="+h.sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	prompts, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	shown := answer(ctx, prompts, stdin)
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("cexecctl exec --ask: %w: %s%s", err, shown, out.String())
	}
	return out.String(), nil
}

// Prompts of `cexecctl exec --ask` (cmd/cexecctl/exec/ask.go).
const (
	askPrompt  = "answer? [a]ccept, [d]ecline or [c]ancel: "
	linePrefix = "  open: "
)

// answer is the user at the terminal: it accepts every question, opens a
// URL it is shown (a sign-in link) as a browser would before accepting,
// and takes every form field's default (SEP-1034) by pressing Enter. It
// returns what the terminal showed.
func answer(ctx context.Context, prompts io.Reader, keys io.WriteCloser) string {
	defer keys.Close()
	var shown strings.Builder
	r := bufio.NewReader(prompts)
	var line []byte
	link := ""
	for {
		b, err := r.ReadByte()
		if err != nil {
			return shown.String()
		}
		shown.WriteByte(b)
		line = append(line, b)
		switch s := string(line); {
		case b == '\n':
			if u, ok := strings.CutPrefix(strings.TrimSuffix(s, "\n"), linePrefix); ok {
				link = u
			}
			line = line[:0]
		case strings.HasSuffix(s, askPrompt):
			if link != "" {
				if err := browse(ctx, link); err != nil {
					fmt.Fprintf(&shown, "[harness: %v]\n", err)
				}
				link = ""
			}
			_, _ = io.WriteString(keys, "a\n")
			line = line[:0]
		case strings.HasSuffix(s, "): "):
			_, _ = io.WriteString(keys, "\n")
			line = line[:0]
		}
	}
}
