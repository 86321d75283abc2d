package policy_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/pluginapi"
)

func load(t *testing.T, file string) (*config.Config, hcl.Diagnostics) {
	t.Helper()
	env := func(k string) (string, bool) {
		if k == "HOME" {
			return "/home/test", true
		}
		return "", false
	}
	cfg, diags := config.Load("testdata/"+file, config.Overrides{LookupEnv: env})
	if diags.HasErrors() {
		t.Fatalf("config.Load(%s): %v", file, diags)
	}
	return cfg, diags
}

func validPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	cfg, _ := load(t, "valid.hcl")
	ps, diags := policy.DecodeTenants(cfg)
	if len(diags) > 0 {
		t.Fatalf("DecodeTenants: %v", diags)
	}
	if len(ps) != 2 || ps["open"] == nil {
		t.Fatalf("policies = %v", ps)
	}
	return ps["acme"]
}

func TestDecodeValid(t *testing.T) {
	p := validPolicy(t)
	if !p.Strict || p.MaxToolCalls != 3 || p.MaxOutput != 1024 {
		t.Errorf("strict, max_tool_calls, max_output = %v, %d, %d", p.Strict, p.MaxToolCalls, p.MaxOutput)
	}
	if !slices.Equal(p.Allow, []string{"filesystem/*", "memory", "payments/transfer", "mail/send", "cfg/*"}) ||
		!slices.Equal(p.Deny, []string{"memory/delete_*"}) {
		t.Errorf("allow, deny = %q, %q", p.Allow, p.Deny)
	}
	if len(p.DenyCode) != 2 || p.DenyCode[0].String() != `\bsubprocess\b` {
		t.Errorf("deny_code = %v", p.DenyCode)
	}
	if len(p.Constraints) != 5 {
		t.Fatalf("constraints = %d", len(p.Constraints))
	}
	c := p.Constraints[2]
	if c.Tool != "payments/transfer" || c.Argument != "amount" || !c.Required || c.Min.String() != "0" || c.Max.String() != "100" {
		t.Errorf("constraint 2 = %+v", c)
	}
	if c.DeclRange.Start.Line != 21 || !strings.HasSuffix(c.DeclRange.Filename, "valid.hcl") {
		t.Errorf("constraint 2 at %s, want valid.hcl:21", c.DeclRange)
	}
	if !slices.Equal(p.Constraints[4].OneOf, []string{"read", "write", "7"}) {
		t.Errorf("one_of = %q", p.Constraints[4].OneOf)
	}
	if empty, diags := policy.Decode(nil); len(diags) > 0 || empty == nil || empty.CheckToolCall("any", "tool", nil) != nil {
		t.Errorf("Decode(nil) = %+v, %v; want an empty policy that allows", empty, diags)
	}
}

// TestDecodeErrors checks that every mistake in the fixture is reported at
// its own line, with a summary that says what is wrong.
func TestDecodeErrors(t *testing.T) {
	cfg, _ := load(t, "errors.hcl")
	p, diags := policy.DecodeTenants(cfg)
	if p["bad"] != nil {
		t.Errorf("a policy with errors decoded: %+v", p["bad"])
	}
	// gohcl stops at schema errors; without them, everything else is
	// reported at once.
	checkDiags(t, diags, []struct {
		line    int
		summary string
	}{{9, "Unsupported argument"}})
	src := strings.Replace(readFile(t, "testdata/errors.hcl"), `    color          = "blue"`, "", 1)
	_, diags = policy.Decode(parseBody(t, src))
	checkDiags(t, diags, []struct {
		line    int
		summary string
	}{
		{3, "Unsuitable value type"},
		{4, "Invalid max_tool_calls"},
		{5, "Invalid max_output"},
		{6, "Invalid tool pattern"}, // ""
		{6, "Invalid tool pattern"}, // "a/b/c"
		{7, "Invalid tool pattern"},
		{8, "Invalid regular expression"},
		{11, "Empty constraint"},
		{16, "Invalid bounds"},
		{21, "Invalid regular expression"},
		{23, "Missing required argument"},
		{26, "Invalid tool pattern"},
		{28, "Invalid one_of"},
		{32, "Invalid prefix"},
	})
	// A bad list element is blamed on the element, not the whole list.
	line6 := strings.Split(src, "\n")[5]
	for _, d := range diags {
		if strings.Contains(d.Detail, `"a/b/c"`) {
			if want := strings.Index(line6, `"a/b/c"`) + 1; d.Subject.Start.Column != want {
				t.Errorf("a/b/c blamed at column %d, want %d", d.Subject.Start.Column, want)
			}
		}
	}
}

func checkDiags(t *testing.T, diags hcl.Diagnostics, want []struct {
	line    int
	summary string
}) {
	t.Helper()
	var got []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError || d.Subject == nil {
			t.Errorf("diagnostic without a place: %v", d)
			continue
		}
		got = append(got, strings.TrimSpace(strings.Join([]string{itoa(d.Subject.Start.Line), d.Summary}, " ")))
	}
	var exp []string
	for _, w := range want {
		exp = append(exp, itoa(w.line)+" "+w.summary)
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		t.Errorf("diagnostics (line summary):\n got %q\nwant %q\n%v", got, exp, diags)
	}
}

func TestDiagnosticsNameTheFile(t *testing.T) {
	cfg, _ := load(t, "errors.hcl")
	_, diags := policy.DecodeTenants(cfg)
	for _, d := range diags {
		if !strings.HasSuffix(d.Subject.Filename, "testdata/errors.hcl") {
			t.Errorf("diagnostic in %q: %v", d.Subject.Filename, d)
		}
	}
	if len(diags) == 0 {
		t.Fatal("no diagnostics")
	}
}

func TestCheckTool(t *testing.T) {
	p := validPolicy(t)
	tests := []struct {
		server, tool string
		rule         string // "" when allowed
	}{
		{"filesystem", "read_text_file", ""},
		{"memory", "read_graph", ""},
		{"memory", "delete_entities", "deny"},
		{"github", "create_issue", "allow"},
		{"payments", "refund", "allow"},
		{"filesystemx", "read", "allow"},
	}
	for _, tt := range tests {
		err := p.CheckTool(tt.server, tt.tool)
		checkViolation(t, tt.server+"/"+tt.tool, err, tt.rule)
	}
	err := p.CheckTool("memory", "delete_entities")
	if want := `policy: tool memory/delete_entities is denied by deny pattern "memory/delete_*"`; err == nil || err.Error() != want {
		t.Errorf("deny message = %v, want %s", err, want)
	}
	err = (&policy.Policy{Allow: []string{"a/*"}}).CheckTool("b", "c")
	if want := `policy: tool b/c is not allowed (allow: "a/*")`; err == nil || err.Error() != want {
		t.Errorf("allow message = %v, want %s", err, want)
	}
	var nilPolicy *policy.Policy
	if err := nilPolicy.CheckToolCall("x", "y", json.RawMessage(`{"a":1}`)); err != nil {
		t.Errorf("nil policy denied: %v", err)
	}
}

func checkViolation(t *testing.T, what string, err error, rule string) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Errorf("%s: denied: %v", what, err)
		}
		return
	}
	var v *policy.Violation
	if !errors.As(err, &v) || v.Rule != rule || !errors.Is(err, pluginapi.ErrDenied) {
		t.Errorf("%s: error %v, want a %s violation wrapping ErrDenied", what, err, rule)
	}
}

func TestCheckArguments(t *testing.T) {
	p := validPolicy(t)
	tests := []struct {
		name, tool, args string
		want             string // message, "" when allowed
	}{
		{"inside prefix", "filesystem/write_file", `{"path": "/data/out/report.csv", "content": "x"}`, ""},
		{"the prefix folder itself", "filesystem/write_file", `{"path": "/data/out"}`, ""},
		{"outside prefix", "filesystem/write_file", `{"path": "/etc/passwd"}`, `policy: filesystem/write_file argument "path" must start with "/data/out/"`},
		{"dot-dot escape", "filesystem/write_file", `{"path": "/data/out/../secrets/x"}`, `policy: filesystem/write_file argument "path" must start with "/data/out/"`},
		{"sibling with the prefix as a name prefix", "filesystem/write_file", `{"path": "/data/outside"}`, `policy: filesystem/write_file argument "path" must start with "/data/out/"`},
		{"relative path", "filesystem/write_file", `{"path": "data/out/x"}`, `policy: filesystem/write_file argument "path" must start with "/data/out/"`},
		{"not a string", "filesystem/write_file", `{"path": 7}`, `policy: filesystem/write_file argument "path" must be a string`},
		{"absent, not required", "filesystem/list_allowed_directories", `{}`, ""},
		{"list elements", "filesystem/read_multiple_files", `{"paths": ["/data/a", "/data/b"]}`, ""},
		{"list element outside", "filesystem/read_multiple_files", `{"paths": ["/data/a", "/root/b"]}`, `policy: filesystem/read_multiple_files argument "paths[1]" must start with "/data/"`},
		{"amount within", "payments/transfer", `{"amount": 100}`, ""},
		{"amount above max", "payments/transfer", `{"amount": 100.01}`, `policy: payments/transfer argument "amount" must be at most 100`},
		{"amount below min", "payments/transfer", `{"amount": -1}`, `policy: payments/transfer argument "amount" must be at least 0`},
		{"huge amount", "payments/transfer", `{"amount": 1e400}`, `policy: payments/transfer argument "amount" must be at most 100`},
		{"amount as string", "payments/transfer", `{"amount": "5"}`, `policy: payments/transfer argument "amount" must be a number`},
		{"amount required", "payments/transfer", `{}`, `policy: payments/transfer argument "amount" is required`},
		{"amount null", "payments/transfer", `{"amount": null}`, `policy: payments/transfer argument "amount" is required`},
		{"no arguments at all", "payments/transfer", ``, `policy: payments/transfer argument "amount" is required`},
		{"pattern match", "mail/send", `{"to": "bob@example.com"}`, ""},
		{"pattern mismatch", "mail/send", `{"to": "bob@evil.com"}`, `policy: mail/send argument "to" must match "@example\\.com$"`},
		{"one_of nested", "cfg/set", `{"options": {"mode": "read"}}`, ""},
		{"one_of number by value", "cfg/set", `{"options": {"mode": 7.0}}`, ""},
		{"one_of miss", "cfg/set", `{"options": {"mode": "admin"}}`, `policy: cfg/set argument "options.mode" must be one of "read", "write", "7"`},
		{"one_of object", "cfg/set", `{"options": {"mode": {"x": 1}}}`, `policy: cfg/set argument "options.mode" must be one of "read", "write", "7"`},
		{"arguments not an object", "mail/send", `["bob@evil.com"]`, `policy: mail/send arguments are not a JSON object, so its constraints cannot be checked`},
		{"no constraint for the tool", "memory/read_graph", `not even JSON`, ""},
	}
	for _, tt := range tests {
		server, tool, _ := strings.Cut(tt.tool, "/")
		err := p.CheckArguments(server, tool, json.RawMessage(tt.args))
		got := ""
		if err != nil {
			got = err.Error()
			checkViolation(t, tt.name, err, "constraint")
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		if got != "" && strings.Contains(tt.args, "evil") && strings.Contains(got, "evil") {
			t.Errorf("%s: the message quotes an argument value: %s", tt.name, got)
		}
	}
}

func TestCheckToolCallOrder(t *testing.T) {
	p := validPolicy(t)
	// A denied tool is reported as denied even when its arguments are bad.
	err := p.CheckToolCall("memory", "delete_entities", json.RawMessage(`{}`))
	checkViolation(t, "denied tool", err, "deny")
	err = p.CheckToolCall("filesystem", "write_file", json.RawMessage(`{"path": "/tmp/x"}`))
	checkViolation(t, "bad argument", err, "constraint")
}

func TestCounter(t *testing.T) {
	p := validPolicy(t)
	c := p.NewCounter()
	for i := range 3 {
		if err := c.Add(); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	err := c.Add()
	checkViolation(t, "fourth call", err, "max_tool_calls")
	if err == nil || err.Error() != "policy: execution exceeded max_tool_calls (3)" {
		t.Errorf("message = %v", err)
	}
	if c.Count() != 4 {
		t.Errorf("Count = %d", c.Count())
	}
	if err := p.NewCounter().Add(); err != nil {
		t.Errorf("a new execution starts from zero: %v", err)
	}
	unlimited := (&policy.Policy{}).NewCounter()
	for range 1000 {
		if err := unlimited.Add(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckCode(t *testing.T) {
	p := validPolicy(t)
	tests := []struct {
		code, want string
	}{
		{"import subprocess\nsubprocess.run(['ls'])", `policy: code matches deny_code pattern "\\bsubprocess\\b"`},
		{"import os; os.system('ls')", `policy: code matches deny_code pattern "os\\.system"`},
		{"import os; os.listdir('.')", ""},
		{"my_subprocesses = 1", ""},
	}
	for _, tt := range tests {
		err := p.CheckCode(tt.code)
		got := ""
		if err != nil {
			got = err.Error()
			checkViolation(t, tt.code, err, "deny_code")
		}
		if got != tt.want {
			t.Errorf("CheckCode(%q) = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestCheckOutput(t *testing.T) {
	p := validPolicy(t)
	if err := p.CheckOutput(1024); err != nil {
		t.Errorf("1024 bytes: %v", err)
	}
	err := p.CheckOutput(3 << 20)
	checkViolation(t, "3 MiB", err, "max_output")
	if err == nil || err.Error() != "policy: output of 3MiB exceeds max_output (1KiB)" {
		t.Errorf("message = %v", err)
	}
	if err := (&policy.Policy{}).CheckOutput(1 << 40); err != nil {
		t.Errorf("no max_output: %v", err)
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, server, tool string
		want                  bool
	}{
		{"filesystem", "filesystem", "anything", true},
		{"filesystem/*", "filesystem", "read", true},
		{"filesystem/*", "filesystems", "read", false},
		{"memory/delete_*", "memory", "delete_entities", true},
		{"memory/delete_*", "memory", "create_entities", false},
		{"*/write_*", "fs", "write_file", true},
		{"*", "any", "thing", true},
		{"f?/read", "fs", "read", true},
	}
	for _, tt := range tests {
		if got := policy.Match(tt.pattern, tt.server, tt.tool); got != tt.want {
			t.Errorf("Match(%q, %q, %q) = %v", tt.pattern, tt.server, tt.tool, got)
		}
	}
}

// TestBareSize: max_output without a unit is refused with what to write,
// for a number and for a unitless string alike.
func TestBareSize(t *testing.T) {
	for _, src := range []string{"max_output = 200", `max_output = "200"`} {
		_, diags := policy.Decode(parseBody(t, "tenant \"t\" {\n  policy {\n    "+src+"\n  }\n}\n"))
		checkDiags(t, diags, []struct {
			line    int
			summary string
		}{{3, "Invalid max_output"}})
		if want := `write max_output = "200MiB"`; len(diags) == 0 || !strings.Contains(diags[0].Detail, want) {
			t.Errorf("%s: diagnostics %v lack %q", src, diags, want)
		}
	}
}

// TestDecodePIIFailOpen: detection fails closed unless the policy opts
// out, and a strict policy cannot opt out.
func TestDecodePIIFailOpen(t *testing.T) {
	for _, tc := range []struct {
		src      string
		want     bool
		conflict bool
	}{
		{src: ``, want: false},
		{src: `pii_fail_open = false`, want: false},
		{src: `pii_fail_open = true`, want: true},
		{src: "strict = true\npii_fail_open = true", conflict: true},
	} {
		p, diags := policy.Decode(parseBody(t, "tenant \"t\" {\npolicy {\n"+tc.src+"\n}\n}\n"))
		if tc.conflict {
			if p != nil || len(diags) != 1 || diags[0].Summary != "Conflicting pii_fail_open" || diags[0].Subject.Start.Line != 4 {
				t.Errorf("%q: %+v, %v; want a conflict on line 4", tc.src, p, diags)
			}
			continue
		}
		if diags.HasErrors() || p.PIIFailOpen != tc.want {
			t.Errorf("%q: pii_fail_open = %v, %v; want %v", tc.src, p.PIIFailOpen, diags, tc.want)
		}
	}
}
