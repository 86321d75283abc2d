package pii

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

// served returns the guard behind real (in-process) gRPC, as cexecd sees it.
func served(t *testing.T) guard.Guard {
	t.Helper()
	return plugintest.Guard(t, New(hclog.NewNullLogger()))
}

func configure(t *testing.T, g guard.Guard, cfg string) pluginapi.Diagnostics {
	t.Helper()
	diags, err := g.Configure(t.Context(), json.RawMessage(cfg), guard.APIVersion)
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return diags
}

func values(text string, spans []guard.Span) []string {
	out := []string{}
	for _, s := range spans {
		out = append(out, s.Type+":"+text[s.Start:s.End])
	}
	return out
}

func TestInfo(t *testing.T) {
	info := plugintest.CheckInfo(t, served(t), pluginapi.KindGuard)
	if info.Name != "pii" {
		t.Errorf("name %q, want pii (cexec.hcl names it so)", info.Name)
	}
}

// TestSchemaMatchesConfig keeps the declared schema and the decoded struct
// in step: an attribute declared but not decoded would be rejected as
// unknown, one decoded but not declared could never be set.
func TestSchemaMatchesConfig(t *testing.T) {
	tags := func(typ reflect.Type) []string {
		var out []string
		for i := range typ.NumField() {
			out = append(out, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(out)
		return out
	}
	names := func(s pluginapi.ConfigSchema) []string {
		var out []string
		for _, a := range s.Attributes {
			out = append(out, a.Name)
		}
		for _, b := range s.Blocks {
			out = append(out, b.TypeName)
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(schema), tags(reflect.TypeFor[config]()); !slices.Equal(got, want) {
		t.Errorf("schema %v, config struct %v", got, want)
	}
	if got, want := names(schema.Blocks[0].Body), tags(reflect.TypeFor[codeRuleConfig]()); !slices.Equal(got, want) {
		t.Errorf("code_rule schema %v, struct %v", got, want)
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		// attrs of the error diagnostics expected; nil means success.
		attrs []string
	}{
		{"empty", `{}`, nil},
		{"everything", `{"types":["EMAIL","PHONE","PERSON"],"phone_region":"gb","entropy_secrets":false,
			"entropy_threshold":4.2,"entropy_min_length":24,"ner_url":"http://127.0.0.1:9/ner","ner_timeout":"2s",
			"ner_headers":{"Authorization":"Bearer x"},"code_checks":["proc_environ","ptrace"],
			"code_rule":[{"name":"no_subprocess","match":["subprocess"],"message":"no"}]}`, nil},
		{"unknown type", `{"types":["EMAIL","SSN"]}`, []string{"types"}},
		{"person without ner", `{"types":["PERSON"]}`, []string{"types"}},
		{"bad region", `{"phone_region":"ZZ"}`, []string{"phone_region"}},
		{"threshold too high", `{"entropy_threshold":9}`, []string{"entropy_threshold"}},
		{"threshold zero", `{"entropy_threshold":0}`, []string{"entropy_threshold"}},
		{"fractional length", `{"entropy_min_length":20.5}`, []string{"entropy_min_length"}},
		{"length too small", `{"entropy_min_length":3}`, []string{"entropy_min_length"}},
		{"ner url not http", `{"ner_url":"file:///etc/passwd"}`, []string{"ner_url"}},
		{"ner timeout", `{"ner_url":"http://x/","ner_timeout":"soon"}`, []string{"ner_timeout"}},
		{"ner header name", `{"ner_url":"http://x/","ner_headers":{"Bad Name":"v"}}`, []string{"ner_headers"}},
		{"unknown code check", `{"code_checks":["nope"]}`, []string{"code_checks"}},
		{"bad rule pattern", `{"code_rule":[{"name":"a","match":["ok"]},{"name":"b","match":["(x"]}]}`, []string{"code_rule.1.match"}},
		{"rule without name", `{"code_rule":[{"name":"","match":["x"]}]}`, []string{"code_rule.0.name"}},
		{"several at once", `{"phone_region":"ZZ","entropy_threshold":-1,"types":["X"]}`, []string{"types", "phone_region", "entropy_threshold"}},
		{"unknown attribute", `{"region":"US"}`, []string{"region"}},
		{"wrong type", `{"types":"EMAIL"}`, []string{"types"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags := configure(t, served(t), tt.cfg)
			var got []string
			for _, d := range diags {
				if d.Severity == pluginapi.SeverityError {
					got = append(got, d.Attribute)
				}
			}
			if !slices.Equal(got, tt.attrs) {
				t.Errorf("error attributes %q, want %q (diagnostics: %v)", got, tt.attrs, diags)
			}
		})
	}
}

func TestConfigureWarnsAndRejectsVersion(t *testing.T) {
	g := served(t)
	diags := configure(t, g, `{"ner_headers":{"Authorization":"Bearer x"}}`)
	if len(diags) != 1 || diags[0].Severity != pluginapi.SeverityWarning || diags[0].Attribute != "ner_headers" {
		t.Errorf("want one warning on ner_headers, got %v", diags)
	}
	diags = configure(t, g, `{"types":["EMAIL"],"ner_url":"http://127.0.0.1:9/"}`)
	if len(diags) != 1 || diags[0].Severity != pluginapi.SeverityWarning || diags[0].Attribute != "types" {
		t.Errorf("want one warning on types, got %v", diags)
	}
	for _, v := range []string{"v2", ""} {
		diags, err := g.Configure(t.Context(), json.RawMessage(`{}`), v)
		if err != nil || !diags.HasErrors() {
			t.Errorf("API version %q accepted: %v %v", v, diags, err)
		}
	}
}

func TestDetectHonoursTypes(t *testing.T) {
	g := served(t)
	text := "Mail ann@example.com or call +44 20 7946 0958; card 4111 1111 1111 1111."
	spans, err := g.Detect(t.Context(), guard.DetectRequest{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(text, spans), []string{"EMAIL:ann@example.com", "PHONE:+44 20 7946 0958", "CREDIT_CARD:4111 1111 1111 1111"}; !slices.Equal(got, want) {
		t.Errorf("before Configure: got %q, want %q", got, want)
	}

	if d := configure(t, g, `{"types":["EMAIL","PHONE"],"phone_region":"GB"}`); d.HasErrors() {
		t.Fatal(d)
	}
	tests := []struct {
		name  string
		types []string
		want  []string
	}{
		{"configured types", nil, []string{"EMAIL:ann@example.com", "PHONE:+44 20 7946 0958"}},
		{"request narrows", []string{"PHONE"}, []string{"PHONE:+44 20 7946 0958"}},
		{"request for an unconfigured type", []string{"CREDIT_CARD"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans, err := g.Detect(t.Context(), guard.DetectRequest{Text: text, Types: tt.types})
			if err != nil {
				t.Fatal(err)
			}
			if got := values(text, spans); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFailedConfigureKeepsPrevious: a rejected block leaves the last good
// configuration in force.
func TestFailedConfigureKeepsPrevious(t *testing.T) {
	g := served(t)
	if d := configure(t, g, `{"types":["EMAIL"]}`); d.HasErrors() {
		t.Fatal(d)
	}
	if d := configure(t, g, `{"types":["PHONE"],"phone_region":"ZZ"}`); !d.HasErrors() {
		t.Fatal("bad region accepted")
	}
	text := "ann@example.com +44 20 7946 0958"
	spans, err := g.Detect(t.Context(), guard.DetectRequest{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(text, spans); !slices.Equal(got, []string{"EMAIL:ann@example.com"}) {
		t.Errorf("got %q, want the EMAIL-only configuration", got)
	}
}

func TestPersonThroughNER(t *testing.T) {
	// A protocol-level NER test server: answers the documented contract
	// with the code point offsets of "Zoë Adams".
	ner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Text string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("X-Key") != "k" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		i := strings.Index(req.Text, "Zoë Adams")
		ents := []map[string]any{}
		if i >= 0 {
			start := len([]rune(req.Text[:i]))
			ents = append(ents, map[string]any{"start": start, "end": start + 9, "type": "PERSON"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"entities": ents})
	}))
	defer ner.Close()
	g := served(t)
	if d := configure(t, g, `{"ner_url":"`+ner.URL+`","ner_headers":{"X-Key":"k"}}`); d.HasErrors() {
		t.Fatal(d)
	}
	text := "Café owner Zoë Adams (zoe@example.com)"
	spans, err := g.Detect(t.Context(), guard.DetectRequest{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(text, spans), []string{"PERSON:Zoë Adams", "EMAIL:zoe@example.com"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	ner.Close()
	_, err = g.Detect(t.Context(), guard.DetectRequest{Text: text})
	if !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("with the NER endpoint down: err = %v, want ErrUnavailable across gRPC", err)
	}
	spans, err = g.Detect(t.Context(), guard.DetectRequest{Text: text, Types: []string{"EMAIL"}})
	if err != nil || len(spans) != 1 {
		t.Errorf("EMAIL alone must not need the NER endpoint: %v %v", spans, err)
	}
}

func TestCheckCode(t *testing.T) {
	g := served(t)
	attack := "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.ptrace(16, 1, 0, 0)\nprint(open('/proc/1/environ').read())"
	// Off by default: unimplemented, so the host stops asking.
	if d, err := g.CheckCode(t.Context(), guard.CheckCodeRequest{Tenant: "t", Session: "s", Code: attack}); !errors.Is(err, pluginapi.ErrUnimplemented) {
		t.Fatalf("CheckCode without checks = %+v, %v; want ErrUnimplemented", d, err)
	}
	if diags := configure(t, g, `{"code_checks":["ptrace"],"code_rule":[{"name":"no_environ","match":["/proc/\\S*environ"],"message":"no peeking"}]}`); diags.HasErrors() {
		t.Fatal(diags)
	}
	tests := []struct {
		name  string
		code  string
		allow bool
		rules []string
	}{
		{"benign", "print(sum(range(10)))", true, nil},
		{"attack", attack, false, []string{`code denied by guard rule "ptrace"`, `code denied by guard rule "no_environ"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.CheckCode(t.Context(), guard.CheckCodeRequest{Code: tt.code})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, diag := range d.Diagnostics {
				got = append(got, diag.Summary)
				if diag.Severity != pluginapi.SeverityError || !strings.Contains(diag.Detail, "line ") {
					t.Errorf("diagnostic %+v is not an error pointing at a line", diag)
				}
			}
			if d.Allow != tt.allow || !slices.Equal(got, tt.rules) {
				t.Errorf("got allow=%v %q, want allow=%v %q", d.Allow, got, tt.allow, tt.rules)
			}
		})
	}
}

func TestCheckToolCallUnimplemented(t *testing.T) {
	_, err := served(t).CheckToolCall(t.Context(), guard.CheckToolCallRequest{Server: "fs", Tool: "read"})
	if !errors.Is(err, pluginapi.ErrUnimplemented) {
		t.Errorf("err = %v, want ErrUnimplemented", err)
	}
}
