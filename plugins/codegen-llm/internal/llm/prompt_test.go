package llm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/cexec/cexec/pluginapi/codegen"
)

// The stubs in testdata were rendered by core/catalog/stubgen from the
// reference filesystem server's tools/list; kitchen_sink_search_items.py is
// stubgen's golden file with every awkward construct it emits.
func TestCompactStubKeepsSignatureTypesAndDocstring(t *testing.T) {
	python := testPython(t)
	files, err := filepath.Glob("testdata/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no stub fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src := string(raw)
			got := compactStub(src)
			if err := checkCompiles(t.Context(), python, got); err != nil {
				t.Fatalf("compacted stub does not compile: %v\n%s", err, got)
			}
			if len(got) >= len(src) {
				t.Errorf("not smaller: %d >= %d bytes", len(got), len(src))
			}
			for _, gone := range []string{"call_tool(", "# Code generated", "__all__", "_arguments: dict"} {
				if strings.Contains(got, gone) {
					t.Errorf("compacted stub still has %q:\n%s", gone, got)
				}
			}
			function := strings.TrimSuffix(filepath.Base(f), ".py")
			function = strings.TrimPrefix(function, "kitchen_sink_")
			if !strings.Contains(got, "def "+function+"(") || !strings.Contains(got, `"""`) {
				t.Errorf("signature or docstring lost:\n%s", got)
			}
			for _, line := range strings.Split(src, "\n") {
				if strings.HasPrefix(line, "class ") && !strings.Contains(got, line) {
					t.Errorf("type %q lost", line)
				}
			}
		})
	}
}

func TestCompactStubLeavesUnfollowableSourceAlone(t *testing.T) {
	for _, src := range []string{
		"def broken(\n    x: int,\n", // signature never ends
		"def f():\n    \"\"\"never closed\n    return 1\n",
	} {
		if got := compactStub(src); got != src {
			t.Errorf("compactStub(%q) = %q, want it unchanged", src, got)
		}
	}
	if got := compactStub("def f(a, b):\n    return a + b\n"); got != "def f(a, b):\n    ...\n" {
		t.Errorf("function without docstring: %q", got)
	}
}

func TestBuildPrompt(t *testing.T) {
	listing := make([]string, maxListing+25)
	for i := range listing {
		listing[i] = fmt.Sprintf("data/file%03d.csv", i)
	}
	req := codegen.GenerateRequest{
		Task: "  Sum the amounts in data/*.csv  ",
		Tools: []codegen.Tool{
			stubTool(t, "search_files", "Search files."),
			{ID: "db/query", Server: "db", Name: "query", Description: "Run SQL.", InputSchema: []byte(`{"type": "object",
				"properties": {"sql": {"type": "string"}}}`)},
		},
		Skills:           []codegen.Skill{{Name: "csv_report", Description: "Summarise a CSV file.", Source: "def run(path: str) -> str:\n    \"\"\"Report on a CSV.\"\"\"\n    return path\n"}},
		WorkspaceListing: listing,
		Previous:         &codegen.Attempt{Code: "print(x)\n", Error: strings.Repeat("frame\n", 2000) + "NameError: name 'x' is not defined"},
	}
	p := buildPrompt(req)
	for _, want := range []string{
		"Task:\nSum the amounts in data/*.csv\n",
		"from servers.filesystem import search_files\n```python\n",
		"def search_files(",
		"from servers.db import query\n",
		`# arguments follow this JSON schema: {"type":"object","properties":{"sql":{"type":"string"}}}`,
		"skills.csv_report: Summarise a CSV file.",
		"def run(path: str) -> str:\n    \"\"\"Report on a CSV.\"\"\"",
		fmt.Sprintf("Files in /workspace (%d):", len(listing)),
		"data/file199.csv\n... and 25 more\n",
		"Your previous program failed:\n```python\nprint(x)\n```",
		"NameError: name 'x' is not defined",
		"... (truncated)",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if strings.Contains(p, "data/file200.csv") {
		t.Error("listing not capped")
	}
	if strings.Contains(p, "return path") {
		t.Error("skill body not compacted")
	}
	if len(p) > 16000 {
		t.Errorf("prompt is %d bytes; caps did not hold", len(p))
	}
	if !strings.Contains(buildPrompt(codegen.GenerateRequest{Task: "x"}), "/workspace is empty.") {
		t.Error("an empty workspace is not said")
	}
}

func TestFenceOutgrowsBackticksInside(t *testing.T) {
	if got := fence("python", "s = '```'\n"); got != "````python\ns = '```'\n````\n" {
		t.Errorf("fence = %q", got)
	}
}

// TestPromptBudget measures the prompt in real tokens (o200k_base, the
// GPT-4o/o-series tokenizer, offline) and holds it to a budget: the system
// prompt goes with every request, so it must stay small.
func TestPromptBudget(t *testing.T) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int { return len(enc.Encode(s, nil, nil)) }

	sys := count(systemPrompt)
	req := sampleRequest(t)
	user := count(buildPrompt(req))
	var full, compact int
	for _, tool := range req.Tools {
		full += count(tool.StubSource)
		compact += count(compactStub(tool.StubSource))
	}
	t.Logf("system prompt %d tokens (~%d estimated); sample user prompt %d tokens (~%d estimated); stubs %d -> %d tokens compacted",
		sys, approxTokens(systemPrompt), user, approxTokens(buildPrompt(req)), full, compact)
	if sys > 300 {
		t.Errorf("system prompt is %d tokens; budget 300", sys)
	}
	if user > 600 {
		t.Errorf("sample user prompt is %d tokens; budget 600", user)
	}
	if compact >= full {
		t.Errorf("compaction saved nothing: %d -> %d", full, compact)
	}
}
