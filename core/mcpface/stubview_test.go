package mcpface

import (
	"os"
	"strings"
	"testing"
)

// TestStubInterface checks what list_tools keeps of a generated stub (the
// stub generator's golden kitchen-sink module) and of a hand-written local
// tool.
func TestStubInterface(t *testing.T) {
	golden, err := os.ReadFile("../catalog/stubgen/testdata/golden/search_items.py")
	if err != nil {
		t.Fatal(err)
	}
	local := "def word_count(text: str, *, top: int = 10) -> dict[str, Any]:\n    '''Count words.'''\n    words = text.split()\n    return {}\n"
	tests := []struct {
		name, src string
		want      []string
		notWant   []string
	}{
		{"generated", string(golden),
			[]string{"class Node(TypedDict):\n    name: str\n", "def search_items(\n    *,\n    query: str,", "    Returns:\n        The matches, best first.\n    \"\"\"\n"},
			[]string{"Code generated", "from typing", "from cexec", "__all__", "_arguments: dict", "call_tool(\"kitchen", "cast("}},
		{"local", local,
			[]string{"def word_count(text: str, *, top: int = 10) -> dict[str, Any]:\n    '''Count words.'''\n"},
			[]string{"split", "return"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stubInterface(tt.src)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("has %q:\n%s", w, got)
				}
			}
		})
	}
}
