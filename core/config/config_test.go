package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/pluginapi"
)

func TestLoadValid(t *testing.T) {
	dir := pluginDir(t, standardPlugins...)
	cfg, diags := Load("testdata/valid.hcl", Overrides{PluginDir: dir, LookupEnv: fakeEnv(map[string]string{"CEXEC_TEST_API_KEY": "sk-test-123"})})
	if len(diags) > 0 {
		t.Fatalf("diagnostics: %s", diags.Error())
	}
	here, _ := filepath.Abs("testdata")
	if want := (Daemon{
		DataDir:    filepath.Join(here, "state"),
		Socket:     filepath.Join(here, "run", "cexecd.sock"),
		LogLevel:   "debug",
		PluginDir:  dir,
		ServersDir: filepath.Join(here, "servers"),
		SkillsDir:  filepath.Join(here, "skills"),
		Sync:       "batched",
		DiskQuota:  DefaultDiskQuota,
		MaxFiles:   DefaultMaxFiles,
	}); cfg.Daemon != want {
		t.Errorf("daemon = %+v, want %+v", cfg.Daemon, want)
	}
	if len(cfg.Plugins) != 5 {
		t.Fatalf("got %d plugins, want 5", len(cfg.Plugins))
	}
	bw := cfg.Plugin(pluginapi.KindSandbox, "bwrap")
	if bw.Command != "cexec-plugin-sandbox-bwrap" || bw.ResolvedCommand() != filepath.Join(dir, "cexec-plugin-sandbox-bwrap") ||
		bw.Timeout != 10*time.Second || !bw.Required || !reflect.DeepEqual(bw.Args, []string{"--verbose"}) ||
		!reflect.DeepEqual(bw.Env, map[string]string{"LANG": "C.UTF-8"}) || bw.DeclRange.Start.Line != 8 {
		t.Errorf("sandbox plugin = %+v", bw)
	}
	if emb := cfg.Plugin(pluginapi.KindSelector, "embeddings"); emb.Required || emb.Timeout != 30*time.Second {
		t.Errorf("selector plugin = %+v", emb)
	}
	if want := (Pipeline{Selector: "embeddings", Codegen: []string{"llm", "rules"}, Guards: []string{"pii"}, MaxRepairs: 3, SearchLimit: 5, MaxInlineAttachment: 256 << 10}); !reflect.DeepEqual(cfg.Pipeline, want) {
		t.Errorf("pipeline = %+v, want %+v", cfg.Pipeline, want)
	}
	if want := (Sandbox{
		Backend: "bwrap", Network: true, SessionInterpreter: true,
		Pool: Pool{Warm: 1, MaxTotal: 4, IdleTimeout: 90 * time.Second, MaxUses: 10, QueueTimeout: 5 * time.Second},
		Limits: Limits{Memory: 512 << 20, PIDs: 64, Timeout: time.Minute, Output: 65536, Tmp: 1_000_000_000, Shm: 64 << 20,
			MaxFileSize: DefaultMaxFileSize, MaxArgumentSize: 1 << 20, MaxResultSize: 8 << 20},
	}); !reflect.DeepEqual(cfg.Sandbox, want) {
		t.Errorf("sandbox = %+v, want %+v", cfg.Sandbox, want)
	}
	fs := cfg.MCPServer("filesystem")
	if fs.Transport != TransportStdio || fs.Cwd != filepath.Join(here, "work") || !fs.Optional || fs.Timeout != time.Minute ||
		!reflect.DeepEqual(fs.Args, []string{"-y", "@modelcontextprotocol/server-filesystem", "./data"}) {
		t.Errorf("filesystem server = %+v", fs)
	}
	remote := cfg.MCPServer("remote")
	if remote.Transport != TransportSSE || remote.Headers["Authorization"] != "Bearer sk-test-123" || remote.Timeout != 2*time.Minute ||
		remote.MaxArgumentSize != 4096 || remote.MaxResultSize != 0 {
		t.Errorf("remote server = %+v", remote)
	}
	if s := cfg.MCPServer("streamable"); s.Transport != TransportHTTP {
		t.Errorf("streamable transport = %q", s.Transport)
	}
	acme := cfg.Tenant("acme")
	if acme.DiskQuota != 1<<30 || acme.MaxSessionLog != 16<<20 || acme.MaxConcurrent != 2 || !reflect.DeepEqual(acme.AllowedServers, []string{"filesystem"}) || acme.Policy == nil || acme.PolicyRange.Start.Line != 81 {
		t.Errorf("tenant acme = %+v", acme)
	}
	if def := cfg.Tenant("default"); def.AllowedServers != nil || def.Policy != nil || def.DiskQuota != 0 {
		t.Errorf("tenant default = %+v", def)
	}
}

func TestLoadDefaults(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		dataDir  string
		socket   string
		wantDiag string
	}{
		{"xdg", map[string]string{"XDG_DATA_HOME": "/xdg/data", "XDG_RUNTIME_DIR": "/run/user/7"}, "/xdg/data/cexec", "/run/user/7/cexec/cexecd.sock", ""},
		{"home", map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/cexec", filepath.Join(os.TempDir(), "cexec-"+strconv.Itoa(os.Getuid()), "cexecd.sock"), ""},
		{"nothing", map[string]string{"HOME": ""}, "", "", "No data directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte("# empty\n"), "/etc/cexec/cexec.hcl", Overrides{LookupEnv: fakeEnv(tt.env)})
			if tt.wantDiag != "" {
				if len(diags) != 1 || !strings.Contains(diags[0].Summary, tt.wantDiag) {
					t.Fatalf("diags = %v, want %q", diags, tt.wantDiag)
				}
				return
			}
			if len(diags) > 0 {
				t.Fatalf("diags: %s", diags.Error())
			}
			want := Daemon{DataDir: tt.dataDir, Socket: tt.socket, LogLevel: "info", PluginDir: "/etc/cexec/bin", ServersDir: "/etc/cexec/servers", SkillsDir: "/etc/cexec/skills", Sync: "batched",
				DiskQuota: DefaultDiskQuota, MaxFiles: DefaultMaxFiles}
			if cfg.Daemon != want {
				t.Errorf("daemon = %+v, want %+v", cfg.Daemon, want)
			}
			if cfg.Pipeline.MaxRepairs != 2 || cfg.Pipeline.SearchLimit != 8 || cfg.Sandbox.Backend != "" ||
				cfg.Sandbox.Limits.Memory != 256<<20 || cfg.Sandbox.Pool.IdleTimeout != 5*time.Minute {
				t.Errorf("defaults: pipeline %+v sandbox %+v", cfg.Pipeline, cfg.Sandbox)
			}
		})
	}
	if got := endpoint.DefaultSocketFrom(fakeEnv(map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"})); got != "/run/user/1/cexec/cexecd.sock" {
		t.Errorf("DefaultSocketFrom = %q", got)
	}
}

// TestPrecedence checks defaults < file < CEXEC_* environment < flags.
func TestPrecedence(t *testing.T) {
	dirs := map[string]string{}
	for _, n := range []string{"file", "env", "flag"} {
		dirs[n] = pluginDir(t, "sandbox-one", "sandbox-two", "sandbox-three", "guard-pii")
	}
	src := `cexec {
  data_dir   = "/file/data"
  socket     = "/file/sock"
  log_level  = "debug"
  plugin_dir = "` + dirs["file"] + `"
}
plugin "sandbox" "one" {}
plugin "sandbox" "two" {}
plugin "sandbox" "three" {}
plugin "guard" "pii" {}
sandbox {
  backend = "one"
}
`
	allEnv := map[string]string{
		EnvDataDir: "/env/data", EnvSocket: "/env/sock", EnvLogLevel: "warn",
		EnvPluginDir: dirs["env"], EnvSandboxBackend: "two",
	}
	allFlags := Overrides{DataDir: "/flag/data", Socket: "/flag/sock", LogLevel: "error", PluginDir: dirs["flag"], SandboxBackend: "three"}
	tests := []struct {
		name    string
		src     string
		env     map[string]string
		flags   Overrides
		want    Daemon
		backend string
	}{
		{"file", src, nil, Overrides{}, Daemon{"/file/data", "/file/sock", "debug", dirs["file"], "", "", "batched", nil, DefaultDiskQuota, DefaultMaxFiles, ""}, "one"},
		{"env over file", src, allEnv, Overrides{}, Daemon{"/env/data", "/env/sock", "warn", dirs["env"], "", "", "batched", nil, DefaultDiskQuota, DefaultMaxFiles, ""}, "two"},
		{"flags over env", src, allEnv, allFlags, Daemon{"/flag/data", "/flag/sock", "error", dirs["flag"], "", "", "batched", nil, DefaultDiskQuota, DefaultMaxFiles, ""}, "three"},
		{"empty env is unset", src, map[string]string{EnvLogLevel: ""}, Overrides{}, Daemon{"/file/data", "/file/sock", "debug", dirs["file"], "", "", "batched", nil, DefaultDiskQuota, DefaultMaxFiles, ""}, "one"},
		{"mixed", src, map[string]string{EnvSocket: "/env/sock"}, Overrides{LogLevel: "trace"}, Daemon{"/file/data", "/env/sock", "trace", dirs["file"], "", "", "batched", nil, DefaultDiskQuota, DefaultMaxFiles, ""}, "one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ov := tt.flags
			ov.LookupEnv = fakeEnv(tt.env)
			cfg, diags := load([]byte(tt.src), filepath.Join(t.TempDir(), "cexec.hcl"), ov)
			if len(diags) > 0 {
				t.Fatalf("diags: %s", diags.Error())
			}
			got := cfg.Daemon
			got.ServersDir, got.SkillsDir = "", "" // defaults beside the file; TestToolDirs covers them
			if got != tt.want {
				t.Errorf("daemon = %+v, want %+v", got, tt.want)
			}
			if cfg.Sandbox.Backend != tt.backend {
				t.Errorf("backend = %q, want %q", cfg.Sandbox.Backend, tt.backend)
			}
			if p := cfg.Plugin(pluginapi.KindSandbox, "one"); filepath.Dir(p.ResolvedCommand()) != tt.want.PluginDir {
				t.Errorf("plugin resolved in %s, want plugin_dir %s", p.ResolvedCommand(), tt.want.PluginDir)
			}
		})
	}
}

func TestOverrideErrors(t *testing.T) {
	dir := pluginDir(t, "sandbox-bwrap", "guard-pii")
	src := "plugin \"sandbox\" \"bwrap\" {}\nplugin \"guard\" \"pii\" {}\n"
	tests := []struct {
		name string
		env  map[string]string
		ov   Overrides
		want string
	}{
		{"bad env log level", map[string]string{EnvLogLevel: "loud"}, Overrides{}, `Invalid log level "loud" from environment variable CEXEC_LOG_LEVEL`},
		{"bad flag log level", nil, Overrides{LogLevel: "verbose"}, `Invalid log level "verbose" from command-line flag`},
		{"unknown backend", map[string]string{EnvSandboxBackend: "firecracker"}, Overrides{}, `Unknown sandbox plugin "firecracker" from environment variable CEXEC_SANDBOX_BACKEND`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ov := tt.ov
			ov.PluginDir, ov.LookupEnv = dir, fakeEnv(tt.env)
			_, diags := load([]byte(src), "cexec.hcl", ov)
			if len(diags) != 1 || diags[0].Summary != tt.want {
				t.Errorf("diags = %v, want one %q", diags, tt.want)
			}
		})
	}
}

func TestPipelineDefaults(t *testing.T) {
	dir := pluginDir(t, "selector-a", "selector-b", "codegen-x", "codegen-y", "sandbox-bwrap", "sandbox-msb", "guard-pii")
	tests := []struct {
		name  string
		src   string
		diags []string
	}{
		{"single selector chosen", `plugin "selector" "a" {}`, nil},
		{"two selectors need a choice", "plugin \"selector\" \"a\" {}\nplugin \"selector\" \"b\" {}\npipeline {}\n", []string{"3:Ambiguous selector plugin"}},
		{"two backends need a choice", "plugin \"sandbox\" \"bwrap\" {}\nplugin \"sandbox\" \"msb\" {}\nsandbox {}\nplugin \"guard\" \"pii\" {}\n", []string{"3:Ambiguous sandbox plugin"}},
		{"two selectors without a pipeline block", "plugin \"selector\" \"a\" {}\n\nplugin \"selector\" \"b\" {}\n", []string{"3:Ambiguous selector plugin"}},
		{"two backends without a sandbox block", "plugin \"guard\" \"pii\" {}\nplugin \"sandbox\" \"bwrap\" {}\nplugin \"sandbox\" \"msb\" {}\n", []string{"3:Ambiguous sandbox plugin"}},
		{"codegen chain defaults to file order", "plugin \"codegen\" \"y\" {}\nplugin \"codegen\" \"x\" {}\n", nil},
		{"warm above max", "sandbox {\n  pool {\n    warm = 5\n    max_total = 2\n  }\n}\n", []string{"3:Pool warm count above maximum"}},
		{"python belongs to the sandbox plugin", "sandbox {\n  python = \"/usr/bin/python3\"\n}\n", []string{"2:Unsupported argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte(tt.src), "cexec.hcl", Overrides{PluginDir: dir, LookupEnv: fakeEnv(nil)})
			var got []string
			for _, d := range diags {
				line := "no file:line"
				if d.Subject != nil {
					line = strconv.Itoa(d.Subject.Start.Line)
				}
				got = append(got, line+":"+d.Summary)
			}
			if !reflect.DeepEqual(got, tt.diags) {
				t.Fatalf("diags = %q, want %q", got, tt.diags)
			}
			switch tt.name {
			case "single selector chosen":
				if cfg.Pipeline.Selector != "a" {
					t.Errorf("selector = %q", cfg.Pipeline.Selector)
				}
			case "codegen chain defaults to file order":
				if !reflect.DeepEqual(cfg.Pipeline.Codegen, []string{"y", "x"}) {
					t.Errorf("codegen = %q", cfg.Pipeline.Codegen)
				}
			}
		})
	}
}

func TestMCPServerValidation(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		diags []string
		tr    string
	}{
		{"stdio inferred", `command = "npx"`, nil, TransportStdio},
		{"sse inferred", `url = "https://x.example/sse/"`, nil, TransportSSE},
		{"http inferred", `url = "https://x.example/mcp"`, nil, TransportHTTP},
		{"explicit sse", "url = \"https://x.example/events\"\n  transport = \"sse\"", nil, TransportSSE},
		{"bad transport", "command = \"npx\"\n  transport = \"grpc\"", []string{"3:Invalid transport"}, ""},
		{"stdio with url", "url = \"https://x.example/mcp\"\n  transport = \"stdio\"", []string{"3:Transport needs a command"}, ""},
		{"http with command", "command = \"npx\"\n  transport = \"http\"", []string{"3:Transport needs a url"}, ""},
		{"headers on stdio", "command = \"npx\"\n  headers = { A = \"b\" }", []string{"3:Headers need a remote server"}, ""},
		{"env on remote", "url = \"https://x.example/mcp\"\n  env = { A = \"b\" }", []string{"3:Argument needs a local server"}, ""},
		{"relative url", `url = "x.example/mcp"`, []string{"2:Invalid url"}, ""},
		{"ftp url", `url = "ftp://x.example/mcp"`, []string{"2:Invalid url"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "mcp_server \"s\" {\n  " + tt.body + "\n}\n"
			cfg, diags := load([]byte(src), "cexec.hcl", Overrides{LookupEnv: fakeEnv(nil)})
			var got []string
			for _, d := range diags {
				got = append(got, strconv.Itoa(d.Subject.Start.Line)+":"+d.Summary)
			}
			if !reflect.DeepEqual(got, tt.diags) {
				t.Fatalf("diags = %q, want %q", got, tt.diags)
			}
			if tt.tr != "" && cfg.MCPServer("s").Transport != tt.tr {
				t.Errorf("transport = %q, want %q", cfg.MCPServer("s").Transport, tt.tr)
			}
		})
	}
}

func TestTenantAllowedServersWarning(t *testing.T) {
	src := "mcp_server \"fs\" {\n  command = \"npx\"\n}\ntenant \"t\" {\n  allowed_servers = [\"fs\", \"local_tools\"]\n}\n"
	_, diags := load([]byte(src), "cexec.hcl", Overrides{LookupEnv: fakeEnv(nil)})
	checkDiags(t, diags, []wantDiag{{5, "Unknown server in allowed_servers", true}})
}

func TestValidateTenantID(t *testing.T) {
	for id, ok := range map[string]bool{
		"acme": true, "a": true, "team_1-x": true, strings.Repeat("a", 64): true,
		"": false, "..": false, "a/b": false, "a\x00b": false, "Acme": false, "ünï": false,
		strings.Repeat("a", 65): false, "a.b": false, " a": false,
	} {
		if err := ValidateTenantID(id); (err == nil) != ok {
			t.Errorf("ValidateTenantID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"1024", 0, `"1024" has no unit`},
		{"512B", 512, ""},
		{"1KB", 1000, ""},
		{"1KiB", 1024, ""},
		{"256MiB", 256 << 20, ""},
		{" 2 GiB ", 2 << 30, ""},
		{"1.5GiB", 3 << 29, ""},
		{"1GB", 1_000_000_000, ""},
		{"8TiB", 8 << 40, ""},
		{"1.5B", 0, "not a whole number"},
		{"256XB", 0, `unknown unit "XB"`},
		{"256mb", 0, `unknown unit "mb"`},
		{"-1MiB", 0, "not a size"},
		{"MiB", 0, "not a size"},
		{"", 0, "not a size"},
		{"9999999TiB", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseSize(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestSHA256(t *testing.T) {
	dir := pluginDir(t, "sandbox-bwrap", "guard-pii")
	sum := sha256.Sum256([]byte("#!/bin/sh\necho sandbox-bwrap\n"))
	tests := []struct {
		sha  string
		want []wantDiag
	}{
		{hex.EncodeToString(sum[:]), nil},
		{strings.ToUpper(hex.EncodeToString(sum[:])), nil},
		{strings.Repeat("ab", 32), []wantDiag{{2, "Plugin binary checksum mismatch", false}}},
		{strings.Repeat("zz", 32), []wantDiag{{2, "Invalid sha256", false}}},
	}
	for _, tt := range tests {
		src := "plugin \"sandbox\" \"bwrap\" {\n  sha256 = \"" + tt.sha + "\"\n}\nplugin \"guard\" \"pii\" {}\n"
		cfg, diags := load([]byte(src), "cexec.hcl", Overrides{PluginDir: dir, LookupEnv: fakeEnv(nil)})
		checkDiags(t, diags, tt.want)
		p := cfg.Plugin(pluginapi.KindSandbox, "bwrap")
		if tt.want == nil && (!bytes.Equal(p.SHA256Bytes, sum[:]) || p.ResolvedCommand() == "") {
			t.Errorf("sha256 %s: SHA256Bytes = %x, resolved %q", tt.sha, p.SHA256Bytes, p.ResolvedCommand())
		}
		if tt.want != nil && p.ResolvedCommand() != "" {
			t.Errorf("sha256 %s: plugin resolved despite the error", tt.sha)
		}
	}
}

// TestPluginDirSymlink allows a plugin_dir that is itself a symlink, and a
// binary symlinked to another file inside it.
func TestPluginDirSymlink(t *testing.T) {
	dir := pluginDir(t, "sandbox-real", "guard-pii")
	link := filepath.Join(t.TempDir(), "plugins")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("cexec-plugin-sandbox-real", filepath.Join(dir, "cexec-plugin-sandbox-alias")); err != nil {
		t.Fatal(err)
	}
	src := "plugin \"sandbox\" \"alias\" {}\nplugin \"sandbox\" \"abs\" {\n  command = \"" + link + "/cexec-plugin-sandbox-real\"\n}\nsandbox {\n  backend = \"alias\"\n}\nplugin \"guard\" \"pii\" {}\n"
	cfg, diags := load([]byte(src), "cexec.hcl", Overrides{PluginDir: link, LookupEnv: fakeEnv(nil)})
	if len(diags) > 0 {
		t.Fatalf("diags: %s", diags.Error())
	}
	real := filepath.Join(dir, "cexec-plugin-sandbox-real")
	for _, p := range cfg.PluginsOfKind(pluginapi.KindSandbox) {
		if got, _ := filepath.EvalSymlinks(p.ResolvedCommand()); got != real || p.ResolvedCommand() != got {
			t.Errorf("%s resolved to %q, want %q", p.Name, p.ResolvedCommand(), real)
		}
	}
}

func TestMaskedJSON(t *testing.T) {
	dir := pluginDir(t, standardPlugins...)
	const secret = "sk-test-very-secret"
	cfg, diags := Load("testdata/valid.hcl", Overrides{PluginDir: dir, LookupEnv: fakeEnv(map[string]string{"CEXEC_TEST_API_KEY": secret})})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	// The plugin env is masked even though it holds no env() value.
	cfg.Plugin(pluginapi.KindSandbox, "bwrap").Env["PLAIN"] = "plain-value"

	plain, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]pluginapi.ConfigSchema{
		"selector/embeddings": {Attributes: []pluginapi.Attribute{{Name: "model", Type: "string"}, {Name: "api_key", Type: "string"}}},
		"sandbox/bwrap":       {Attributes: []pluginapi.Attribute{{Name: "token", Type: "string", Sensitive: true}}},
	}
	withSchemas, err := cfg.MaskedJSONWithSchemas(schemas)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string][]byte{"MaskedJSON": plain, "MaskedJSONWithSchemas": withSchemas} {
		if bytes.Contains(out, []byte(secret)) || bytes.Contains(out, []byte("plain-value")) {
			t.Errorf("%s leaks a secret:\n%s", name, out)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		remote := v["mcp_servers"].([]any)[1].(map[string]any)
		if remote["headers"].(map[string]any)["Authorization"] != maskedValue {
			t.Errorf("%s: header not masked: %v", name, remote["headers"])
		}
		bw := v["plugins"].([]any)[0].(map[string]any)
		if bw["env"].(map[string]any)["LANG"] != maskedValue {
			t.Errorf("%s: plugin env not masked: %v", name, bw["env"])
		}
		if v["cexec"].(map[string]any)["log_level"] != "debug" || v["sandbox"].(map[string]any)["limits"].(map[string]any)["timeout"] != "1m0s" {
			t.Errorf("%s: plain values missing", name)
		}
	}
	var v map[string]any
	if err := json.Unmarshal(withSchemas, &v); err != nil {
		t.Fatal(err)
	}
	emb := v["plugins"].([]any)[1].(map[string]any)["config"].(map[string]any)
	if emb["model"] != "text-embedding-3-small" || emb["api_key"] != maskedValue {
		t.Errorf("selector config = %v; want model shown and api_key masked", emb)
	}
	if !strings.Contains(string(plain), "not shown") {
		t.Errorf("MaskedJSON shows plugin bodies without a schema:\n%s", plain)
	}
}

func TestEnvFunction(t *testing.T) {
	src := `mcp_server "s" {
  command = "srv"
  args    = ["--user", env("USER_NAME"), "--mode", env("MODE", "fast")]
  env     = { KEY = env("KEY"), FIXED = "x" }
}
`
	cfg, diags := load([]byte(src), "cexec.hcl", Overrides{LookupEnv: fakeEnv(map[string]string{"USER_NAME": "bob", "KEY": "k-1"})})
	if len(diags) > 0 {
		t.Fatal(diags.Error())
	}
	s := cfg.MCPServer("s")
	if !reflect.DeepEqual(s.Args, []string{"--user", "bob", "--mode", "fast"}) || s.Env["KEY"] != "k-1" {
		t.Errorf("server = %+v", s)
	}
	out, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	got := v["mcp_servers"].([]any)[0].(map[string]any)
	if want := []any{"--user", maskedValue, "--mode", maskedValue}; !reflect.DeepEqual(got["args"], want) {
		t.Errorf("args = %v, want %v", got["args"], want)
	}
	if want := map[string]any{"KEY": maskedValue, "FIXED": "x"}; !reflect.DeepEqual(got["env"], want) {
		t.Errorf("env = %v, want %v", got["env"], want)
	}
}

// TestSecretsNotInDiagnostics: a value from env() that fails validation is
// not echoed back.
func TestSecretsNotInDiagnostics(t *testing.T) {
	src := "plugin \"sandbox\" \"bwrap\" {\n  timeout = env(\"T\")\n}\nsandbox {\n  limits {\n    memory = env(\"T\")\n  }\n}\n"
	_, diags := load([]byte(src), "cexec.hcl", Overrides{PluginDir: t.TempDir(), LookupEnv: fakeEnv(map[string]string{"T": "hunter2"})})
	var buf bytes.Buffer
	if err := FormatDiagnostics(&buf, diags, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Invalid duration") || !strings.Contains(buf.String(), "Invalid size") {
		t.Fatalf("expected duration and size errors, got:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Errorf("diagnostics leak an env() value:\n%s", buf.String())
	}
}

func TestFormatDiagnostics(t *testing.T) {
	src := []byte("a = 1\nb = 2\n")
	file := &hcl.File{Bytes: src}
	rng := func(line int) *hcl.Range {
		return &hcl.Range{Filename: "x.hcl", Start: hcl.Pos{Line: line, Column: 1}, End: hcl.Pos{Line: line, Column: 2}}
	}
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "second", Detail: "two\nlines", Subject: rng(2)},
		{Severity: hcl.DiagWarning, Summary: "first", Subject: rng(1)},
		{Severity: hcl.DiagError, Summary: "nowhere"},
	}
	var buf bytes.Buffer
	if err := FormatDiagnostics(&buf, diags, map[string]*hcl.File{"x.hcl": file}); err != nil {
		t.Fatal(err)
	}
	want := "error: nowhere\n" +
		"x.hcl:1:1: warning: first\n       1 | a = 1\n" +
		"x.hcl:2:1: error: second\n    two\n    lines\n       2 | b = 2\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestDefaultConfigFile loads the repository's cexec.hcl against fake
// plugin binaries: it must be free of errors and warnings.
func TestDefaultConfigFile(t *testing.T) {
	dir := pluginDir(t, "sandbox-bwrap", "selector-embeddings", "guard-pii", "codegen-rules")
	cfg, diags := Load("../../cexec.hcl", Overrides{PluginDir: dir, LookupEnv: fakeEnv(nil)})
	if len(diags) > 0 {
		var buf bytes.Buffer
		_ = FormatDiagnostics(&buf, diags, filesOf(cfg))
		t.Fatalf("diagnostics:\n%s", buf.String())
	}
	root, _ := filepath.Abs("../..")
	if cfg.Daemon.DataDir != filepath.Join(root, ".cexec") || cfg.Daemon.Socket != endpoint.DefaultSocketFrom(fakeEnv(nil)) {
		t.Errorf("daemon = %+v", cfg.Daemon)
	}
	if len(cfg.Plugins) != 4 {
		t.Errorf("%d plugins, want 4", len(cfg.Plugins))
	}
	if want := (Pipeline{Selector: "embeddings", Codegen: []string{"rules"}, Guards: []string{"pii"}, MaxRepairs: 2, SearchLimit: 8, MaxInlineAttachment: DefaultMaxInlineAttachment}); !reflect.DeepEqual(cfg.Pipeline, want) {
		t.Errorf("pipeline = %+v", cfg.Pipeline)
	}
	if cfg.Sandbox.Backend != "bwrap" || cfg.Sandbox.Network {
		t.Errorf("sandbox = %+v", cfg.Sandbox)
	}
	for _, name := range []string{"filesystem", "memory"} {
		s := cfg.MCPServer(name)
		if s == nil || !s.Optional || s.Transport != TransportStdio || s.Command != "npx" {
			t.Errorf("mcp_server %s = %+v", name, s)
		}
	}
	// The file's own plugin_dir is ./bin next to it.
	cfg, _ = Load("../../cexec.hcl", Overrides{LookupEnv: fakeEnv(nil)})
	if cfg.Daemon.PluginDir != filepath.Join(root, "bin") {
		t.Errorf("plugin_dir = %s", cfg.Daemon.PluginDir)
	}
}

// TestJSONSyntax: a config file ending in .json is read as HCL's JSON
// syntax, with the same checks and positions.
func TestJSONSyntax(t *testing.T) {
	dir := pluginDir(t, "sandbox-bwrap", "guard-pii")
	src := `{
  "plugin": {"sandbox": {"bwrap": {"timeout": "5s"}}, "guard": {"pii": {}}},
  "sandbox": {"limits": {"memory": "12XB"}}
}`
	cfg, diags := load([]byte(src), "cexec.hcl.json", Overrides{PluginDir: dir, LookupEnv: fakeEnv(nil)})
	checkDiags(t, diags, []wantDiag{{3, "Invalid size", false}})
	if p := cfg.Plugin(pluginapi.KindSandbox, "bwrap"); p == nil || p.Timeout != 5*time.Second || p.ResolvedCommand() == "" {
		t.Errorf("plugin = %+v", p)
	}
}

func TestToolDirs(t *testing.T) {
	for _, tc := range []struct {
		name, src       string
		servers, skills string
		wantErrLine     int
	}{
		{"defaults beside the file", "", "servers", "skills", 0},
		{"set", "cexec {\n  servers_dir = \"tools/servers\"\n  skills_dir = \"shared\"\n}\n", "tools/servers", "shared", 0},
		{"must end in servers", "cexec {\n  servers_dir = \"tools\"\n}\n", "", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, diags := load([]byte(tc.src), filepath.Join(dir, "cexec.hcl"), Overrides{LookupEnv: fakeEnv(nil)})
			if tc.wantErrLine > 0 {
				if !diags.HasErrors() || diags[0].Subject.Start.Line != tc.wantErrLine || !strings.Contains(diags[0].Summary, "servers_dir") {
					t.Fatalf("want a servers_dir error at line %d, got %v", tc.wantErrLine, diags)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if cfg.Daemon.ServersDir != filepath.Join(dir, tc.servers) || cfg.Daemon.SkillsDir != filepath.Join(dir, tc.skills) {
				t.Fatalf("got %s and %s", cfg.Daemon.ServersDir, cfg.Daemon.SkillsDir)
			}
		})
	}
}

// TestTenantUIDs decodes tenant_uids: a valid range, and each way a range
// is refused, with the diagnostic on the attribute's line.
func TestTenantUIDs(t *testing.T) {
	tests := []struct {
		value string
		want  *IDRange
		says  string
	}{
		{`"200000-265535"`, &IDRange{First: 200000, Last: 265535}, ""},
		{`"100000 - 100000"`, &IDRange{First: 100000, Last: 100000}, ""},
		{`"200000"`, nil, "is not a range of host uids"},
		{`"a-b"`, nil, "is not a range of host uids"},
		{`"300000-200000"`, nil, "starts after it ends"},
		{`"0-1000"`, nil, "includes 0"},
		{`"65000-66000"`, nil, "includes 65534"},
		{`"65535-70000"`, nil, "includes 65535"},
		{`"100-4294967295"`, nil, "no valid id"},
		{`"100-4294967296"`, nil, "is not a range of host uids"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cexec.hcl")
			src := "cexec {\n  log_level = \"info\"\n  tenant_uids = " + tt.value + "\n}\n"
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, diags := Load(file, Overrides{PluginDir: t.TempDir(), LookupEnv: fakeEnv(nil)})
			if tt.says == "" {
				if diags.HasErrors() || !reflect.DeepEqual(cfg.Daemon.TenantUIDs, tt.want) {
					t.Fatalf("TenantUIDs = %+v, %v; want %+v", cfg.Daemon.TenantUIDs, diags, tt.want)
				}
				return
			}
			if len(diags) != 1 || diags[0].Summary != "Invalid tenant_uids" || !strings.Contains(diags[0].Detail, tt.says) ||
				diags[0].Subject == nil || diags[0].Subject.Start.Line != 3 {
				t.Fatalf("diagnostics = %v; want one Invalid tenant_uids on line 3 saying %q", diags, tt.says)
			}
			if cfg.Daemon.TenantUIDs != nil {
				t.Errorf("TenantUIDs = %+v after an error", cfg.Daemon.TenantUIDs)
			}
		})
	}
}

func TestDiskLimits(t *testing.T) {
	tests := []struct {
		name, src        string
		quota, fileSize  int64
		files            int
		tenantQ, tenantF int64
	}{
		{"defaults", `tenant "acme" {}`, DefaultDiskQuota, DefaultMaxFileSize, DefaultMaxFiles, 0, 0},
		{"set", `
cexec {
  disk_quota = "4GiB"
  max_files  = 500000
}
sandbox {
  limits {
    max_file_size = "16MiB"
  }
}
tenant "acme" {
  disk_quota = "2MiB"
  max_files  = 10000
}`, 4 << 30, 16 << 20, 500000, 2 << 20, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := load([]byte(tt.src), filepath.Join(t.TempDir(), "cexec.hcl"), Overrides{LookupEnv: fakeEnv(map[string]string{"HOME": "/home/u"})})
			if len(diags) > 0 {
				t.Fatalf("diags: %s", diags.Error())
			}
			if cfg.Daemon.DiskQuota != tt.quota || cfg.Daemon.MaxFiles != tt.files || cfg.Sandbox.Limits.MaxFileSize != tt.fileSize {
				t.Errorf("daemon %+v, max_file_size %d", cfg.Daemon, cfg.Sandbox.Limits.MaxFileSize)
			}
			if a := cfg.Tenant("acme"); a.DiskQuota != tt.tenantQ || int64(a.MaxFiles) != tt.tenantF {
				t.Errorf("tenant = %+v", a)
			}
		})
	}
}

func TestStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cexec.hcl")
	src := "cexec {\n  replica = \"a\"\n}\nstore {\n  kind = \"postgres\"\n  dsn = env(\"CEXEC_PG_DSN\")\n  vault_key = env(\"CEXEC_VAULT_KEY\")\n}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	const dsn, key = "postgres://u:pw-secret@db/cexec", "0123456789abcdef-key-secret"
	cfg, diags := Load(file, Overrides{PluginDir: t.TempDir(), LookupEnv: fakeEnv(map[string]string{"CEXEC_PG_DSN": dsn, "CEXEC_VAULT_KEY": key})})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if cfg.Store != (Store{Kind: StorePostgres, DSN: dsn, VaultKey: key}) || cfg.Daemon.Replica != "a" {
		t.Fatalf("store = %+v, replica %q", cfg.Store, cfg.Daemon.Replica)
	}
	out, err := cfg.MaskedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret") || !strings.Contains(string(out), `"kind": "postgres"`) {
		t.Fatalf("masked config:\n%s", out)
	}

	// No replica set: one is derived from the host name.
	src = strings.Replace(src, "  replica = \"a\"\n", "", 1)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags = Load(file, Overrides{PluginDir: t.TempDir(), LookupEnv: fakeEnv(map[string]string{"CEXEC_PG_DSN": dsn, "CEXEC_VAULT_KEY": key})})
	if diags.HasErrors() || !replicaRE.MatchString(cfg.Daemon.Replica) {
		t.Fatalf("derived replica %q, %v", cfg.Daemon.Replica, diags)
	}
	// The default is files, without a replica.
	cfg, diags = Load("testdata/valid.hcl", Overrides{PluginDir: pluginDir(t, standardPlugins...), LookupEnv: fakeEnv(map[string]string{"CEXEC_TEST_API_KEY": "k"})})
	if diags.HasErrors() || cfg.Store.Kind != StoreFiles || cfg.Daemon.Replica != "" {
		t.Fatalf("default store %+v replica %q %v", cfg.Store, cfg.Daemon.Replica, diags)
	}
}

// TestURLSensitive: a url with an env() value in it is marked, so the
// catalog masks it in errors and logs as config show does.
func TestURLSensitive(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{`"https://mcp.example.com/mcp"`, false},
		{`"https://mcp.example.com/mcp?key=${env("K")}"`, true},
	} {
		src := "mcp_server \"r\" {\n  url = " + tt.url + "\n}\n"
		cfg, diags := load([]byte(src), filepath.Join(t.TempDir(), "cexec.hcl"), Overrides{LookupEnv: fakeEnv(map[string]string{"K": "v"})})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if got := cfg.MCPServer("r").URLSensitive; got != tt.want {
			t.Errorf("url %s: URLSensitive = %t, want %t", tt.url, got, tt.want)
		}
	}
}
