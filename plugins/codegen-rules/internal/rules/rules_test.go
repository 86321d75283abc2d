package rules

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every shipped example must select its own rule first and render code that
// Python compiles; one interpreter run checks all of them.
func TestBuiltinExamplesMatchAndCompile(t *testing.T) {
	set, diags := Builtin()
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(set.Rules) < 10 {
		t.Fatalf("only %d built-in rules", len(set.Rules))
	}
	dir := t.TempDir()
	var files []string
	for _, r := range set.Rules {
		if len(r.Examples) == 0 {
			t.Errorf("rule %s has no examples", r.Name)
		}
		for i, ex := range r.Examples {
			ms := set.Find(ex)
			if len(ms) == 0 || ms[0].Rule != r {
				got := "nothing"
				if len(ms) > 0 {
					got = ms[0].Rule.Name
				}
				t.Errorf("example %q of rule %s matched %s first", ex, r.Name, got)
				continue
			}
			code, err := ms[0].Render()
			if err != nil {
				t.Errorf("example %q: %v", ex, err)
				continue
			}
			f := filepath.Join(dir, fmt.Sprintf("%s_%d.py", r.Name, i))
			if err := os.WriteFile(f, []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	out, err := exec.Command("/usr/bin/python3", append([]string{"-m", "py_compile"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("generated code does not compile: %v\n%s", err, out)
	}
}

// Math rules need no tools, so their programs can run here for real.
func TestMathRulesRun(t *testing.T) {
	set, _ := Builtin()
	for _, tc := range []struct{ task, want string }{
		{"what is 2 + 3 * 4", "14"},
		{"calculate (17 - 5) / 4", "3"},
		{"compute 2^10", "1024"},
		{"what is 7 / 2?", "3.5"},
		{"sum of 1, 2, 3", "6"},
		{"average of 4, 8 and 15", "9"},
		{"maximum of 3 9 2", "9"},
		{"product of 2, 3, 4", "24"},
	} {
		t.Run(tc.task, func(t *testing.T) {
			ms := set.Find(tc.task)
			if len(ms) == 0 {
				t.Fatal("no rule matched")
			}
			code, err := ms[0].Render()
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("/usr/bin/python3", "-I", "-c", code).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, code, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Captured text reaches the program only as a literal: quotes, newlines
// and template syntax in the task stay data.
func TestCapturesCannotInjectCode(t *testing.T) {
	set, _ := Builtin()
	task := `write "x"); import os; os.system("id"); print(("{{ .path }}\n" to notes/a.txt`
	ms := set.Find(task)
	if len(ms) == 0 || ms[0].Rule.Name != "write_file" {
		t.Fatalf("expected write_file to match")
	}
	code, err := ms[0].Render()
	if err != nil {
		t.Fatal(err)
	}
	check := `import ast, sys
tree = ast.parse(sys.stdin.read())
calls = [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
assert "system" not in calls, calls
`
	cmd := exec.Command("/usr/bin/python3", "-I", "-c", check)
	cmd.Stdin = strings.NewReader(code)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("injected call survived: %v\n%s\n%s", err, out, code)
	}
}

func TestValueLiterals(t *testing.T) {
	for _, tc := range []struct {
		in      Value
		str     string
		num     string
		numFail bool
	}{
		{`a"b`, `"a\"b"`, "", true},
		{"line\nbreak", `"line\nbreak"`, "", true},
		{"42", `"42"`, "42", false},
		{" 2.5 ", `" 2.5 "`, "2.5", false},
		{"1e999", `"1e999"`, "", true},
		{"NaN", `"NaN"`, "", true},
	} {
		if got := tc.in.String(); got != tc.str {
			t.Errorf("String(%q) = %s, want %s", string(tc.in), got, tc.str)
		}
		got, err := tc.in.Number()
		if (err != nil) != tc.numFail || (!tc.numFail && got != tc.num) {
			t.Errorf("Number(%q) = %q, %v", string(tc.in), got, err)
		}
	}
}

func TestLoadDirDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
		line            int
	}{
		{"bad regexp", "rule \"x\" {\n  pattern = \"(\"\n  template = \"print(1)\"\n}\n", "invalid pattern", 1},
		{"no matcher", "\n\nrule \"x\" {\n  template = \"print(1)\"\n}\n", "needs a pattern or keywords", 3},
		{"bad template", "rule \"x\" {\n  pattern = \"a\"\n  template = \"{{ .x \"\n}\n", "invalid template", 1},
		{"missing template", "rule \"x\" {\n  pattern = \"a\"\n}\n", "Missing required argument", 1},
		{"duplicate", "rule \"x\" {\n  pattern = \"a\"\n  template = \"1\"\n}\nrule \"x\" {\n  pattern = \"b\"\n  template = \"1\"\n}\n", "duplicate rule", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "r.hcl"), []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, diags := LoadDir(dir)
			if !diags.HasErrors() {
				t.Fatal("want an error")
			}
			d := diags[0]
			if !strings.Contains(d.Summary, tc.want) || d.Subject == nil || d.Subject.Start.Line != tc.line {
				t.Fatalf("got %q at %v, want %q at line %d", d.Summary, d.Subject, tc.want, tc.line)
			}
		})
	}
}

func TestKeywordRules(t *testing.T) {
	dir := t.TempDir()
	src := `rule "kw" {
  keywords = [["weather", "forecast"], ["in"]]
  capture  = "in (?P<city>[A-Z][a-z]+)"
  template = "print({{ .city }})"
}
`
	if err := os.WriteFile(filepath.Join(dir, "r.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	set, diags := LoadDir(dir)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, tc := range []struct {
		task  string
		match bool
	}{
		{"what is the weather in Paris", true},
		{"forecast in Oslo please", true},
		{"the weather is nice", false},
		{"weather in lowercase", false},
	} {
		if got := len(set.Find(tc.task)) > 0; got != tc.match {
			t.Errorf("%q: match = %v, want %v", tc.task, got, tc.match)
		}
	}
}
