package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/catalog/stubgen"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadStubTools(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // server:tool,tool;...
		err        string
	}{
		{"grouped in order of first appearance",
			`{"server":"b","name":"x","description":"d","inputSchema":{"type":"object"}}
{"server":"a","name":"y","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}
{"server":"b","name":"z"}
`, "b:x,z;a:y", ""},
		{"bad line", "{\"server\":\"a\",\"name\":\"y\"}\nnot json\n", "", "tools.jsonl:2"},
		{"empty", "", "", "holds no tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "tools.jsonl", tt.body)
			servers, err := loadStubTools(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, s := range servers {
				var names []string
				for _, tool := range s.Tools {
					names = append(names, tool.Name)
				}
				parts = append(parts, s.Name+":"+strings.Join(names, ","))
			}
			if got := strings.Join(parts, ";"); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if ro := servers[1].Tools[0].Annotations.ReadOnlyHint; ro == nil || !*ro {
				t.Errorf("annotations lost: %+v", servers[1].Tools[0].Annotations)
			}
			// Every tool generates a stub.
			if n := len(stubgen.Generate(servers)[0].Stubs); n != 2 {
				t.Errorf("%d stubs for b, want 2", n)
			}
		})
	}
}
