package vault_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/guard"
)

// valueDetector finds fixed values, each with its type.
type valueDetector [][2]string // value, type

func (d valueDetector) Detect(_ context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	var out []guard.Span
	for _, vt := range d {
		for off := 0; ; {
			i := strings.Index(req.Text[off:], vt[0])
			if i < 0 {
				break
			}
			out = append(out, guard.Span{Start: off + i, End: off + i + len(vt[0]), Type: vt[1]})
			off += i + len(vt[0])
		}
	}
	return out, nil
}

const (
	email  = "alice@example.com"
	secret = "it's \"quoted\" \\ and\nnew line\t{b}"
	person = "Zoë O'Brien"
	word   = "nope"
)

// pythonVault returns a vault holding [EMAIL_1]=email, [SECRET_1]=secret,
// [PERSON_1]=person and [NAME_1]=word.
func pythonVault(t testing.TB) *vault.Vault {
	t.Helper()
	det := valueDetector{{email, "EMAIL"}, {secret, "SECRET"}, {person, "PERSON"}, {word, "NAME"}}
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", det)
	got := tokenize(t, v, email+" "+secret+" "+person+" "+word)
	if got != "[EMAIL_1] [SECRET_1] [PERSON_1] [NAME_1]" {
		t.Fatalf("setup: %q", got)
	}
	return v
}

// TestUntokenizePythonSource pins the rewritten source of typical cases.
func TestUntokenizePythonSource(t *testing.T) {
	v := pythonVault(t)
	tests := []struct{ name, in, want string }{
		{"double quotes", `write_file(path="/out/a.txt", content="Dear [EMAIL_1]")`, `write_file(path="/out/a.txt", content="Dear alice@example.com")`},
		{"escaping", `x = '[SECRET_1]'`, `x = 'it\'s "quoted" \\ and\nnew line\t{b}'`},
		{"f-string braces", `x = f"{n}: [SECRET_1]"`, `x = f"{n}: it's \"quoted\" \\ and\nnew line\t{{b}}"`},
		{"raw becomes non-raw", `x = r"\d+ [EMAIL_1]"`, `x = "\\d+ alice@example.com"`},
		{"raw without a token stays raw", `x = r"\d+ [EMAIL_9]"`, `x = r"\d+ [EMAIL_9]"`},
		{"bytes escape non-ASCII", `x = b'[PERSON_1]'`, `x = b'Zo\xc3\xab O\'Brien'`},
		{"code and comments untouched", "send([EMAIL_1])  # to [EMAIL_1]\n", "send([EMAIL_1])  # to [EMAIL_1]\n"},
		{"quote in comment is no string", "# it's [EMAIL_1]\nx = '[EMAIL_1]'", "# it's [EMAIL_1]\nx = 'alice@example.com'"},
		{"unknown tokens stay", `x = "[EMAIL_2] [FOO_1]"`, `x = "[EMAIL_2] [FOO_1]"`},
		{"identifier ending like a prefix", `bar = rb; x = rb"[EMAIL_1]"`, `bar = rb; x = b"alice@example.com"`},
		{"no tokens", "print('hello')\n", "print('hello')\n"},
	}
	for _, tt := range tests {
		got, err := v.UntokenizePython(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestUntokenizePythonRuns executes the rewritten code with the real
// Python and checks the value each literal evaluates to.
func TestUntokenizePythonRuns(t *testing.T) {
	v := pythonVault(t)
	cases := []struct {
		name, code string
		want       string // value of x; for bytes, its bytes
		bytes      bool
	}{
		{"double", `x = "to [EMAIL_1]"`, "to " + email, false},
		{"single", `x = 'to [SECRET_1]!'`, "to " + secret + "!", false},
		{"triple double", `x = """[SECRET_1]"""`, secret, false},
		{"triple single", "x = '''a\n[SECRET_1]\nb'''", "a\n" + secret + "\nb", false},
		{"value ending in a quote, triple", `x = """[SECRET_1]"""`, secret, false},
		{"raw", `x = r"\d [EMAIL_1]"`, `\d ` + email, false},
		{"raw with escaped quote", `x = r'[SECRET_1]\''`, secret + `\'`, false},
		{"raw with backslash before token", `x = r"\[SECRET_1]"`, `\` + secret, false},
		{"raw triple", "x = r'''\\n\n[SECRET_1]'''", "\\n\n" + secret, false},
		{"f-string", `x = f"hi {1+1} [SECRET_1] {{x}}"`, "hi 2 " + secret + " {x}", false},
		{"f-string format spec", `x = f"{'a'!r:>5} [EMAIL_1]"`, "  'a' " + email, false},
		{"f-string nested literal", `x = f"{'[EMAIL_1]'.upper()}"`, strings.ToUpper(email), false},
		{"f-string nested field in spec", `x = f"{'a':>{2+3}}[PERSON_1]"`, "    a" + person, false},
		{"raw f-string", `x = rf"{1}\n[SECRET_1]"`, `1\n` + secret, false},
		{"bytes", `x = b"[PERSON_1]"`, person, true},
		{"raw bytes", `x = Rb"[PERSON_1]\x"`, person + `\x`, true},
		{"unicode prefix", `x = u"[PERSON_1]"`, person, false},
		{"invalid escape before token", `x = "\[NAME_1]"`, `\` + word, false},
		{"escaped backslash before token", `x = "\\[NAME_1]"`, `\` + word, false},
		{"escape after token", `x = "[NAME_1]\n"`, word + "\n", false},
		{"line continuation", "x = \"[EMAIL_1]\\\n[EMAIL_1]\"", email + email, false},
		{"concatenation", `x = "[EMAIL_1]" '[PERSON_1]'`, email + person, false},
		{"comment with token", "x = \"[EMAIL_1]\"  # [EMAIL_1] it's\n", email, false},
		{"unknown token", `x = "[EMAIL_2]"`, "[EMAIL_2]", false},
		{"dict key and value", `x = {"[EMAIL_1]": "[PERSON_1]"}["[EMAIL_1]"]`, person, false},
	}
	codes := make([]string, len(cases))
	for i, c := range cases {
		out, err := v.UntokenizePython(c.code)
		if err != nil {
			t.Fatal(err)
		}
		codes[i] = out
	}
	results := runPython(t, codes)
	for i, c := range cases {
		r := results[i]
		if r.Err != "" {
			t.Errorf("%s: %s\nrewritten: %s", c.name, r.Err, codes[i])
			continue
		}
		got := r.S
		if c.bytes {
			b, _ := hex.DecodeString(r.B)
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%s: x = %q, want %q\nrewritten: %s", c.name, got, c.want, codes[i])
		}
	}
}

type pyResult struct {
	S   string `json:"s"`
	B   string `json:"b"`
	Err string `json:"err"`
}

// runPython execs each code in a fresh namespace and reports x.
func runPython(t *testing.T, codes []string) []pyResult {
	t.Helper()
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		testutil.SkipMissing(t, "no /usr/bin/python3: %v", err)
	}
	script := `
import json, sys, warnings
warnings.simplefilter("ignore")
out = []
for code in json.load(sys.stdin):
    ns = {}
    try:
        exec(compile(code, "<agent>", "exec"), ns)
        x = ns["x"]
        out.append({"b": x.hex()} if isinstance(x, bytes) else {"s": x})
    except Exception as e:
        out.append({"err": repr(e)})
json.dump(out, sys.stdout)
`
	in, _ := json.Marshal(codes)
	cmd := exec.CommandContext(t.Context(), py, "-I", "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var res []pyResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(codes) {
		t.Fatalf("python output %s: %v", out, err)
	}
	return res
}

// TestUntokenizePythonKeepsSourceWithoutTokens checks that code with
// token-shaped text the vault did not issue comes back byte for byte.
func TestUntokenizePythonKeepsSourceWithoutTokens(t *testing.T) {
	v := pythonVault(t)
	srcs := []string{
		"x = [a for a in b]\ny = d[EMAIL]\n",
		`s = f"{d['k']!s:>{w}}" + r'\[' + b"\x00"`,
		"'''unterminated [EMAIL_9]",
		`"unterminated single [EMAIL_9]` + "\nnext = 1",
		`f"{`,
	}
	for _, src := range srcs {
		got, err := v.UntokenizePython(src)
		if err != nil {
			t.Fatal(err)
		}
		if got != src {
			t.Errorf("UntokenizePython(%q) = %q", src, got)
		}
	}
}
