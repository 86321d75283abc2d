package config

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// wantDiag is one expected diagnostic: its line in the fixture, a substring
// of its summary, and whether it is only a warning.
type wantDiag struct {
	line    int
	summary string
	warning bool
}

// TestFixtureDiagnostics loads each broken fixture and checks that exactly
// the expected diagnostics come back, on the expected lines.
func TestFixtureDiagnostics(t *testing.T) {
	dir := pluginDir(t, standardPlugins...)
	env := fakeEnv(map[string]string{"HOME": "/home/test", "CEXEC_TEST_TOKEN": "s3cret-token"})
	tests := []struct {
		file string
		want []wantDiag
	}{
		{"unknown_block.hcl", []wantDiag{
			{6, "Unsupported block type", false},
			{10, "Unsupported argument", false},
		}},
		{"wrong_type.hcl", []wantDiag{
			{2, "Incorrect attribute value type", false},
			{3, "Incorrect attribute value type", false},
			{7, "Incorrect attribute value type", false},
			{11, "Incorrect attribute value type", false},
			{12, "Incorrect attribute value type", false},
			{14, "Invalid number", false},
		}},
		{"missing_required.hcl", []wantDiag{
			{2, "Missing required argument", false},
			{9, "Conflicting arguments", false},
		}},
		{"unknown_kind.hcl", []wantDiag{
			{3, "Unknown plugin kind", false},
			{7, "Invalid plugin name", false},
			{9, "Missing name for plugin", false},
		}},
		{"missing_binary.hcl", []wantDiag{
			{4, "Plugin binary not found", false},
			{9, "Plugin binary not found", false},
			{12, "Plugin binary not found", true},
			{16, "Plugin binary is not executable", false},
		}},
		{"sha256_mismatch.hcl", []wantDiag{
			{3, "Plugin binary checksum mismatch", false},
			{7, "Invalid sha256", false},
		}},
		{"bad_units.hcl", []wantDiag{
			{2, "Invalid duration", false},
			{7, "Invalid duration", false},
			{10, "Invalid size", false},
			{11, "Invalid duration", false},
			{12, "Invalid size", false},
			{13, "Invalid size", false},
			{19, "Invalid duration", false},
			{25, "Invalid size", false},
		}},
		{"bare_sizes.hcl", []wantDiag{
			{4, "Invalid size", false},
			{5, "Invalid size", false},
			{6, "Invalid size", false},
			{11, "Invalid size", false},
		}},
		{"tool_limits.hcl", []wantDiag{
			{4, "Size too large", false},
			{10, "Invalid size", false},
		}},
		{"tenant_caps.hcl", []wantDiag{
			{8, "Invalid size", false},
			{9, "Invalid duration", false},
			{13, "Invalid size", false},
		}},
		{"disk_limits.hcl", []wantDiag{
			{3, "Invalid size", false},
			{4, "Number out of range", false},
			{9, "Invalid size", false},
			{15, "Invalid number", false},
		}},
		{"timeout_cap.hcl", []wantDiag{
			{4, "Timeout too long", false},
		}},
		{"disk_floors.hcl", []wantDiag{
			{3, "Size too small", false},
			{4, "Number out of range", false},
			{8, "Size too small", false},
			{9, "Number out of range", false},
		}},
		{"bad_sync.hcl", []wantDiag{
			{4, "Invalid sync", false},
		}},
		{"bad_store.hcl", []wantDiag{
			{4, "Invalid replica id", false},
			{7, "Missing store dsn", false},
			{9, "Short vault_key", false},
		}},
		{"bad_store_kind.hcl", []wantDiag{
			{3, "Invalid store kind", false},
		}},
		{"store_files_dsn.hcl", []wantDiag{
			{3, "Setting of another store", false},
			{4, "Setting of another store", false},
		}},
		{"bad_tenant_uids.hcl", []wantDiag{
			{4, "Invalid tenant_uids", false},
		}},
		{"duplicate_plugin.hcl", []wantDiag{
			{5, "Duplicate plugin", false},
			{13, "Duplicate mcp_server", false},
		}},
		{"pipeline_unknown.hcl", []wantDiag{
			{7, "Unknown selector plugin", false},
			{8, "Unknown codegen plugin", false},
			{11, "Unknown guard plugin", false},
			{16, "Unknown sandbox plugin", false},
		}},
		{"server_command.hcl", []wantDiag{
			{2, "Cannot run server command", false},
			{6, "Cannot run server command", true},
			{11, "Cannot run server command", false},
			{25, "Cannot run server command", false},
		}},
		{"pipeline_duplicate.hcl", []wantDiag{
			{7, "Duplicate codegen plugin", false},
			{10, "Duplicate guard plugin", false},
		}},
		{"env_unset.hcl", []wantDiag{
			{11, "Error in function call", false},
			{16, "Not enough function arguments", false},
		}},
		{"invalid_tenant.hcl", []wantDiag{
			{8, "Invalid tenant id", false},
			{10, "Invalid tenant id", false},
			{12, "Duplicate tenant", false},
			{14, "Invalid tenant id", false},
		}},
		{"no_guard.hcl", []wantDiag{
			{1, "No PII guard", false},
		}},
		{"unlisted_plugins.hcl", []wantDiag{
			{3, "Guard plugin never called", true},
			{7, "Codegen plugin never called", true},
		}},
		{"guards_off.hcl", []wantDiag{
			{5, "PII guard off", true},
		}},
		{"tenant_scope.hcl", []wantDiag{
			{4, "Tenant variable not allowed here", false},
			{5, "Argument needs a tenant-scoped server", false},
			{9, "Tenant variable not allowed here", false},
			{10, "Invalid scope", false},
			{14, "Unsupported attribute", false},
			{16, "Invalid duration", false},
			{17, "Number out of range", false},
			{20, "Tenant variable not allowed here", false},
			{24, "Unknown mcp_server", false},
			{25, "Override of a shared server", false},
			{27, "Headers need a remote server", false},
			{29, "Duplicate mcp_server", false},
		}},
		{"metrics_invalid.hcl", []wantDiag{
			{3, "Invalid listen address", false},
			{7, "Invalid size", false},
			{8, "Number out of range", false},
		}},
		{"metrics_public.hcl", []wantDiag{
			{3, "Metrics reachable from other machines", true},
		}},
		{"builtin_server.hcl", []wantDiag{
			{5, "Unknown built-in server", false},
			{8, "Unknown built-in server", false},
			{10, "Argument not for a built-in server", false},
			{12, "Unknown built-in server", false},
			{14, "Invalid scope", false},
		}},
		{"oauth.hcl", []wantDiag{
			{4, "OAuth needs a remote server", false},
			{10, "Secret written in the file", true},
			{11, "Invalid client_metadata_url", false},
			{12, "Invalid token_endpoint_auth_method", false},
			{13, "Number out of range", false},
			{14, "Invalid grant", false},
			{19, "Client credentials need a client", false},
			{27, "Invalid client_assertion_key", false},
		}},
		{"telemetry_invalid.hcl", []wantDiag{
			{4, "Invalid endpoint", false},
			{5, "Invalid protocol", false},
			{6, "Number out of range", false},
			{7, "Incorrect attribute value type", false},
			{8, "Invalid header name", false},
		}},
		{"symlink_escape.hcl", []wantDiag{
			{4, "Plugin binary escapes plugin_dir", false},
			{7, "Plugin command escapes plugin_dir", false},
			{11, "Plugin command outside plugin_dir", false},
		}},
	}
	// says holds what a fixture's formatted diagnostics must tell the user.
	says := map[string][]string{
		"bare_sizes.hcl": {
			`write memory = "256MiB" for mebibytes or "256B" for bytes`,
			`write output = "1024MiB"`,
			`write disk_quota = "1MiB"`,
		},
		"no_guard.hcl": {
			`Add plugin "guard" "pii" {}`,
			`pipeline { guards = [] }`,
		},
		"disk_limits.hcl": {
			`write disk_quota = "512MiB" for mebibytes or "512B" for bytes`,
			`"max_files" must be at least 64, not 0`,
			`"max_file_size": not a size`,
		},
		"server_command.hcl": {
			`command /nonexistent/bin: stat /nonexistent/bin: no such file or directory`,
			`command "npx" not found in the server's PATH (/nonexistent)`,
			`To start without it, set optional = true.`,
			`install Node.js and npm`,
		},
		"pipeline_duplicate.hcl": {
			`"rules" is already in codegen at testdata/pipeline_duplicate.hcl:7,`,
		},
		"timeout_cap.hcl": {
			`at most 24h0m0s`,
			`got 25h0m0s`,
		},
		"disk_floors.hcl": {
			`"disk_quota" must be at least 1 MiB`,
			`got 1024 bytes`,
			`"max_files" must be at least 64, not 63`,
		},
		"tenant_caps.hcl": {
			`write max_session_log = "4096MiB" for mebibytes or "4096B" for bytes`,
			`"max_session_log": not a size`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg, diags := Load("testdata/"+tt.file, Overrides{PluginDir: dir, LookupEnv: env})
			var out bytes.Buffer
			if err := FormatDiagnostics(&out, diags, filesOf(cfg)); err != nil {
				t.Fatal(err)
			}
			t.Logf("diagnostics:\n%s", out.String())
			checkDiags(t, diags, tt.want)
			for _, want := range tt.want {
				loc := "testdata/" + tt.file + ":" + strconv.Itoa(want.line) + ":"
				if !strings.Contains(out.String(), loc) {
					t.Errorf("formatted output lacks %q", loc)
				}
			}
			for _, want := range says[tt.file] {
				if !strings.Contains(out.String(), want) {
					t.Errorf("formatted output lacks %q", want)
				}
			}
			if strings.Contains(out.String(), "s3cret-token") {
				t.Error("formatted diagnostics contain a secret from env()")
			}
		})
	}
}

// checkDiags requires diags to be exactly want, in any order.
func checkDiags(t *testing.T, diags hcl.Diagnostics, want []wantDiag) {
	t.Helper()
	used := make([]bool, len(diags))
	for _, w := range want {
		found := false
		for i, d := range diags {
			if used[i] || d.Subject == nil || d.Subject.Start.Line != w.line || !strings.Contains(d.Summary, w.summary) {
				continue
			}
			if (d.Severity == hcl.DiagWarning) != w.warning {
				t.Errorf("line %d %q: severity %v, want warning=%v", w.line, w.summary, d.Severity, w.warning)
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("no diagnostic %q on line %d", w.summary, w.line)
		}
	}
	for i, d := range diags {
		if !used[i] {
			t.Errorf("unexpected diagnostic: %s", d.Error())
		}
	}
}

func filesOf(cfg *Config) map[string]*hcl.File {
	if cfg == nil {
		return nil
	}
	return cfg.Files()
}
