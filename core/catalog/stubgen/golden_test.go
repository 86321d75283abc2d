package stubgen

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestGolden pins the complete output for the kitchen-sink tool search-items (and its
// package's __init__.py). After an intended change: go test -run TestGolden -update, then
// review the diff.
func TestGolden(t *testing.T) {
	p := Generate([]Server{kitchenSink(t)})[0]
	for _, f := range []string{"search_items.py", "__init__.py"} {
		got, ok := p.Files["servers/kitchen_sink/"+f]
		if !ok {
			t.Fatalf("no file %s in %v", f, p.Files)
		}
		golden := filepath.Join("testdata", "golden", f)
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from %s (run with -update to accept):\n%s", f, golden, got)
		}
	}
}

// TestDeterministic checks that generation depends only on the input, not on map order or
// on the order servers and tools are listed in.
func TestDeterministic(t *testing.T) {
	servers := append(refServers(t), kitchenSink(t))
	first := Generate(servers)
	reversed := make([]Server, len(servers))
	for i, s := range servers {
		tools := make([]Tool, len(s.Tools))
		for j, tl := range s.Tools {
			tools[len(tools)-1-j] = tl
		}
		reversed[len(servers)-1-i] = Server{Name: s.Name, Tools: tools}
	}
	again := Generate(reversed)
	for i, p := range first {
		q := again[len(again)-1-i]
		if p.Name != q.Name || len(p.Files) != len(q.Files) {
			t.Fatalf("package %s/%s differs", p.Name, q.Name)
		}
		for f, src := range p.Files {
			if string(q.Files[f]) != string(src) {
				t.Errorf("%s differs between runs", f)
			}
		}
	}
}
