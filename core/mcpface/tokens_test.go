package mcpface

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// toolsListBudget is the most tokens cexec's whole tools/list may cost an
// agent's context: a handful of tools instead of hundreds.
const toolsListBudget = 1000

// TestToolsListTokens counts the tokens of the tools array exactly as a
// client receives it in tools/list (with execute_task, the largest list),
// with real tokenizers, and fails above the budget.
func TestToolsListTokens(t *testing.T) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	w := newWorld(t)
	c := newRaw(t, nil, w.url+"/mcp")
	if st := c.initialize(); st != http.StatusOK {
		t.Fatalf("initialize: %d", st)
	}
	res, body := c.do(http.MethodPost, listBody)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("tools/list: %s", res.Status)
	}
	var msg struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Result.Tools) != len(toolDefs) {
		t.Fatalf("%d tools, want all %d", len(msg.Result.Tools), len(toolDefs))
	}
	all, err := json.Marshal(msg.Result.Tools)
	if err != nil {
		t.Fatal(err)
	}
	for _, encoding := range []string{"cl100k_base", "o200k_base"} {
		enc, err := tiktoken.GetEncoding(encoding)
		if err != nil {
			t.Fatal(err)
		}
		total := len(enc.EncodeOrdinary(string(all)))
		t.Logf("tools/list: %d tools, %d bytes, %d tokens (%s; budget %d)", len(msg.Result.Tools), len(all), total, encoding, toolsListBudget)
		for _, tool := range msg.Result.Tools {
			var n struct{ Name string }
			_ = json.Unmarshal(tool, &n)
			t.Logf("  %-18s %4d tokens", n.Name, len(enc.EncodeOrdinary(string(tool))))
		}
		if total > toolsListBudget {
			t.Errorf("tools/list costs %d tokens (%s), over the budget of %d", total, encoding, toolsListBudget)
		}
	}
}
