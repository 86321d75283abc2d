package mcpface

import (
	"encoding/json"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// TestReplySizes logs what typical replies cost the model (text and
// structuredContent, in characters and o200k tokens), so that changes to
// the wording can be measured; it asserts nothing about the figures.
func TestReplySizes(t *testing.T) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	call(t, c, ToolSkills, map[string]any{"name": "double", "description": "Doubles a number", "code": "def run(x):\n    return 2 * x\n"})
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
	}{
		{"list_tools get-sum", ToolListTools, map[string]any{"server": "everything", "tool": "get-sum"}},
		{"list_tools create_entities", ToolListTools, map[string]any{"server": "memory", "tool": "create_entities"}},
		{"execute print(1+1)", ToolExecuteCode, map[string]any{"code": "print(1+1)"}},
		{"execute failed tool call", ToolExecuteCode, map[string]any{"code": "from servers.memory import read_graph\nread_graph()"}},
		{"execute sys.exit(3)", ToolExecuteCode, map[string]any{"code": "import sys\nsys.exit(3)"}},
		{"execute long line", ToolExecuteCode, map[string]any{"code": "print('a' * 40000)"}},
		{"list_tools", ToolListTools, nil},
		{"skills double", ToolSkills, map[string]any{"name": "double"}},
	} {
		text, res := call(t, c, tc.tool, tc.args)
		sc, _ := json.Marshal(res.StructuredContent)
		if res.StructuredContent == nil {
			sc = nil
		}
		if testing.Verbose() && len(text) < 3000 {
			t.Logf("%s:\n%s\n%s", tc.name, text, sc)
		}
		t.Logf("%-26s text %5d chars %4d tokens; structured %4d chars %4d tokens", tc.name,
			len([]rune(text)), len(enc.EncodeOrdinary(text)), len(sc), len(enc.EncodeOrdinary(string(sc))))
	}
}
