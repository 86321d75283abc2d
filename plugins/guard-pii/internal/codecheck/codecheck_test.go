package codecheck_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/plugins/guard-pii/internal/codecheck"
)

func TestBuiltinRules(t *testing.T) {
	c, err := codecheck.New([]string{"all"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		code string
		want []string // rule names that deny
	}{
		{"plain code", "import csv\nrows = list(csv.reader(open('/workspace/a.csv')))\nprint(len(rows))", nil},
		{"own environment is fine", "import os\nprint(os.environ.get('HOME'))", nil},
		{"cpuinfo is fine", "print(open('/proc/cpuinfo').read())", nil},
		{"proc environ literal", "data = open('/proc/1/environ').read()", []string{"proc_environ"}},
		{"proc environ f-string", "pid = 7\nopen(f'/proc/{pid}/environ')", []string{"proc_environ"}},
		{"proc environ joined", "import os\nos.path.join('/proc', str(p), 'environ')", []string{"proc_environ"}},
		{"proc mem", "f = open('/proc/self/mem', 'rb')", []string{"proc_mem"}},
		{"ctypes ptrace", "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.ptrace(16, pid, 0, 0)", []string{"ptrace"}},
		{"ptrace word without ctypes", "# we never use ptrace here\nprint(1)", nil},
		{"metadata service", "requests.get('http://169.254.169.254/latest/meta-data/')", []string{"cloud_metadata"}},
		{"docker socket", "s.connect('/var/run/docker.sock')", []string{"docker_socket"}},
		{"ld preload", "env['LD_PRELOAD'] = '/tmp/x.so'", []string{"ld_preload"}},
		{"dev mem", "open('/dev/mem')", []string{"dev_mem"}},
		{"two rules", "import ctypes\nctypes.CDLL(None).ptrace(0)\nopen('/proc/1/environ')", []string{"proc_environ", "ptrace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, d := range c.Check(tt.code) {
				name := d.Summary[strings.Index(d.Summary, `"`)+1 : strings.LastIndex(d.Summary, `"`)]
				got = append(got, name)
				if !strings.Contains(d.Detail, "line ") {
					t.Errorf("detail %q does not point at a line", d.Detail)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("denied by %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOffByDefault(t *testing.T) {
	c, err := codecheck.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Empty() || len(c.Check("open('/proc/1/environ')")) != 0 {
		t.Error("rules are on without being enabled")
	}
	one, err := codecheck.New([]string{"dev_mem"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Check("open('/proc/1/environ')")) != 0 || len(one.Check("open('/dev/kmem')")) != 1 {
		t.Error("enabling one rule enabled another or not that one")
	}
}

func TestCustomRules(t *testing.T) {
	c, err := codecheck.New(nil, []codecheck.Rule{
		{Name: "no_subprocess", Match: []string{`\bsubprocess\b`, `\b(?:Popen|run|call)\(`}},
		{Name: "no_sockets", Match: []string{`\bimport socket\b`}, Message: "raw sockets are not allowed"},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Check("x = 1\nimport subprocess\nsubprocess.run(['ls'])")
	if len(d) != 1 || !strings.Contains(d[0].Summary, "no_subprocess") || !strings.Contains(d[0].Detail, "line 3: subprocess.run(['ls'])") {
		t.Errorf("got %+v", d)
	}
	d = c.Check("import socket")
	if len(d) != 1 || !strings.HasPrefix(d[0].Detail, "raw sockets are not allowed (line 1") {
		t.Errorf("got %+v", d)
	}
	long := "import socket  # " + strings.Repeat("é", 200)
	if d := c.Check(long); len(d) != 1 || !strings.HasSuffix(d[0].Detail, "…); rewrite the code without it") {
		t.Errorf("long line not cut: %+v", d)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		enabled []string
		custom  []codecheck.Rule
		index   int
		field   string
	}{
		{"unknown builtin", []string{"proc_environ", "nope"}, nil, -1, ""},
		{"no name", nil, []codecheck.Rule{{Match: []string{"x"}}}, 0, "name"},
		{"duplicate name", []string{"ptrace"}, []codecheck.Rule{{Name: "ptrace", Match: []string{"x"}}}, 0, "name"},
		{"no patterns", nil, []codecheck.Rule{{Name: "a", Match: []string{"x"}}, {Name: "b"}}, 1, "match"},
		{"bad pattern", nil, []codecheck.Rule{{Name: "a", Match: []string{"ok", "(unclosed"}}}, 0, "match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := codecheck.New(tt.enabled, tt.custom)
			var re *codecheck.RuleError
			if !errors.As(err, &re) || re.Index != tt.index || re.Field != tt.field {
				t.Errorf("err = %v, want RuleError{Index: %d, Field: %q}", err, tt.index, tt.field)
			}
		})
	}
}
