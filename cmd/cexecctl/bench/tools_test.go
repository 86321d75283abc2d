package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/cmd/cexecctl/cli"
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

// TestBenchSearchJSON checks the JSON shape of `bench search --json`: one
// object per ranker with the four metrics, and "scale" only with --scale.
func TestBenchSearchJSON(t *testing.T) {
	root := t.TempDir()
	ds := filepath.Join(root, "tiny")
	if err := os.Mkdir(ds, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ds, "tools.jsonl", `{"server":"files","name":"readTextFile","description":"Read the contents of a text file","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}
{"server":"mail","name":"send_email","description":"Send an email message to a recipient"}
{"server":"weather","name":"get_forecast","description":"Weather forecast for a city"}
`)
	writeFile(t, ds, "queries.jsonl", `{"id":"q1","text":"read text file contents","relevant":["files/readTextFile"]}
{"id":"q2","text":"send an email","relevant":["mail/send_email"]}
{"id":"q3","text":"what is the weather forecast in Paris","relevant":["weather/get_forecast"]}
`)
	for _, scale := range []bool{false, true} {
		var out, errOut bytes.Buffer
		env := &cli.Env{Stdout: &out, Stderr: &errOut, JSON: true}
		res, err := benchSearch(context.Background(), env, searchFlags{dataset: ds, scale: scale, sizesList: []int{20}, searches: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.PrintJSON(res); err != nil {
			t.Fatal(err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"plain_bm25", "selector"} {
			var m map[string]float64
			if err := json.Unmarshal(got[r], &m); err != nil {
				t.Fatalf("%s: %v in %s", r, err, out.String())
			}
			// Each query names its one tool in plain words: both rankers
			// put it first.
			for _, k := range []string{"ndcg10", "recall5", "recall10", "mrr"} {
				if m[k] != 1 {
					t.Errorf("%s %s = %v, want 1", r, k, m[k])
				}
			}
		}
		if _, ok := got["scale"]; ok != scale || len(got) != 2+map[bool]int{false: 0, true: 1}[scale] {
			t.Errorf("scale=%v: keys %v", scale, out.String())
		}
	}
}
