package msb

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

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
	t.Run("fresh globals", func(t *testing.T) { checkFreshGlobals(t, sb, id) })
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
	t.Run("fresh globals", func(t *testing.T) { checkFreshGlobals(t, sb, id) })
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
