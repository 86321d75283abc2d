package tokenbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

func TestTrajectoryTurns(t *testing.T) {
	c, err := newCounter()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		build func(*trajectory)
		turns int
	}{
		{"answer only", func(tr *trajectory) { tr.add("assistant", "42") }, 1},
		{"call and answer", func(tr *trajectory) {
			tr.toolCall("search_tools", map[string]any{"query": "x"}, false)
			tr.toolResult("hits")
			tr.add("assistant", "done")
		}, 2},
		{"parallel calls are one turn", func(tr *trajectory) {
			tr.toolCall("search_tools", map[string]any{"query": "x"}, false)
			tr.toolCall("search_tools", map[string]any{"query": "y"}, true)
			tr.toolResult("hits")
			tr.toolResult("hits")
			tr.add("assistant", "done")
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr trajectory
			tr.add("system", "[]")
			tt.build(&tr)
			s := tr.side(c)
			if s.Turns != tt.turns {
				t.Errorf("turns = %d, want %d", s.Turns, tt.turns)
			}
			for _, enc := range Encodings {
				if s.Tokens[enc] <= 0 {
					t.Errorf("%s: %d tokens", enc, s.Tokens[enc])
				}
			}
			if len(s.Steps) != len(tr.msgs) {
				t.Errorf("%d steps for %d messages", len(s.Steps), len(tr.msgs))
			}
		})
	}
}

// TestRun runs the benchmark at small scale against a real cexecd, the
// reference servers and a catalog peer, and checks what does not depend on
// timing: tokens are counted, code mode reads less than direct calling on
// the large tasks and no more on the tiny one, one-tool tasks take at most
// three turns, and cexec's tools/list stays within 1,000 tokens.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cexecd and its plugins")
	}
	root := testutil.ModuleRoot()
	peers := filepath.Join(root, "test", "peers", "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(peers, "mcp-server-filesystem")); err != nil {
		testutil.SkipMissing(t, "the reference servers are not installed (run scripts/deps.sh): %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testutil.SkipMissing(t, "node is not installed: %v", err)
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		testutil.SkipMissing(t, "bubblewrap is not installed: %v", err)
	}
	bin := t.TempDir()
	for out, pkg := range map[string]string{
		"cexecd":                           "./cmd/cexecd",
		"catalogpeer":                      "./internal/tools/catalogpeer",
		"cexec-plugin-sandbox-bwrap":       "./plugins/sandbox-bwrap",
		"cexec-plugin-selector-embeddings": "./plugins/selector-embeddings",
		"cexec-plugin-guard-pii":           "./plugins/guard-pii",
	} {
		if err := testutil.GoBuild(filepath.Join(bin, out), pkg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Cexecd: filepath.Join(bin, "cexecd"), PluginDir: bin, Peers: peers,
		CatalogPeer: filepath.Join(bin, "catalogpeer"), CatalogTools: catalogSet(t),
		Scale: SmallScale, Progress: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())

	if n := rep.FaceToolsList["o200k_base"]; n <= 0 || n > 1000 {
		t.Errorf("cexec's tools/list is %d o200k_base tokens; the budget is 1,000", n)
	}
	large := []string{"notes", "csv", "doc-copy", "527-tools"}
	oneTool := []string{"csv", "527-tools", "memory", "tiny-file"}
	var names []string
	for _, task := range rep.Tasks {
		names = append(names, task.Name)
		for _, enc := range Encodings {
			d, c := task.Direct.Tokens[enc], task.Code.Tokens[enc]
			if d <= 0 || c <= 0 {
				t.Errorf("%s: %d direct and %d code tokens (%s)", task.Name, d, c, enc)
			}
			if slices.Contains(large, task.Name) && c >= d {
				t.Errorf("%s: code mode took %d tokens, direct %d (%s)", task.Name, c, d, enc)
			}
			if task.Name == "tiny-file" && c > d {
				t.Errorf("tiny-file: code mode took %d tokens, more than direct's %d (%s)", c, d, enc)
			}
		}
		if slices.Contains(oneTool, task.Name) && task.Code.Turns > 3 {
			t.Errorf("%s needs one tool but took %d turns in code mode: %v", task.Name, task.Code.Turns, task.Code.Calls)
		}
		if task.Direct.Turns < 2 || task.Code.Turns < 2 {
			t.Errorf("%s: %d direct and %d code turns", task.Name, task.Direct.Turns, task.Code.Turns)
		}
	}
	if len(names) != 6 {
		t.Errorf("tasks %v", names)
	}
}

// catalogSet writes a small tool-retrieval set in the ../shared/eval
// format: the stock tools the catalog task looks for among filler ones.
func catalogSet(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "tools.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	enc := json.NewEncoder(f)
	symbol := map[string]any{"type": "object", "properties": map[string]any{"symbol": map[string]any{"type": "string", "description": "Stock symbol in Yahoo Finance format."}}, "required": []string{"symbol"}}
	tools := []map[string]any{
		{"server": "yahoo-finance", "name": "get_current_stock_price", "description": "Get the current stock price based on stock symbol.", "inputSchema": symbol},
		{"server": "yahoo-finance", "name": "get_stock_info", "description": "Get company information for a stock symbol.", "inputSchema": symbol},
	}
	for i := range 60 {
		tools = append(tools, map[string]any{"server": fmt.Sprintf("service-%d", i%12), "name": fmt.Sprintf("operation_%d", i),
			"description": fmt.Sprintf("Runs operation %d of a made-up service on a document or record.", i),
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}})
	}
	for _, tool := range tools {
		if err := enc.Encode(tool); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
