package stubgen

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// fixtureTool is a tool as tools/list (or tools.jsonl) spells it.
type fixtureTool struct {
	Server       string          `json:"server"`
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  struct {
		Title           string `json:"title"`
		ReadOnlyHint    *bool  `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint"`
		IdempotentHint  *bool  `json:"idempotentHint"`
		OpenWorldHint   *bool  `json:"openWorldHint"`
	} `json:"annotations"`
}

func (f fixtureTool) tool() Tool {
	in := f.InputSchema
	// A JSON string stands for the raw bytes of a schema that is not valid JSON.
	var raw string
	if json.Unmarshal(in, &raw) == nil {
		in = json.RawMessage(raw)
	}
	return Tool{
		Name:         f.Name,
		Title:        f.Title,
		Description:  f.Description,
		InputSchema:  in,
		OutputSchema: f.OutputSchema,
		Annotations:  Annotations(f.Annotations),
	}
}

type fixtureServer struct {
	Server string        `json:"server"`
	Tools  []fixtureTool `json:"tools"`
}

func loadServerFile(t testing.TB, path string) Server {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx fixtureServer
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s := Server{Name: fx.Server}
	for _, ft := range fx.Tools {
		s.Tools = append(s.Tools, ft.tool())
	}
	return s
}

// refServers loads the real tools/list output of the MCP reference servers
// (testdata/refservers; capture.sh there says how it was captured).
func refServers(t testing.TB) []Server {
	t.Helper()
	files, err := filepath.Glob("testdata/refservers/*.json")
	if err != nil || len(files) != 3 {
		t.Fatalf("want the 3 reference server fixtures, got %v (%v)", files, err)
	}
	var out []Server
	for _, f := range files {
		out = append(out, loadServerFile(t, f))
	}
	return out
}

func kitchenSink(t testing.TB) Server {
	t.Helper()
	return loadServerFile(t, "testdata/kitchen_sink.json")
}

// liveMCPBenchPath is tools.jsonl of the LiveMCPBench evaluation set, relative to this
// package (the module root's ../shared/eval).
var liveMCPBenchPath = filepath.Join("..", "..", "..", "..", "shared", "eval", "livemcpbench", "tools.jsonl")

// liveMCPBench loads the 527 LiveMCPBench tools grouped by server in order of first
// appearance; nil (with a note) when the evaluation set is not checked out next to the repo.
func liveMCPBench(t testing.TB) []Server {
	t.Helper()
	f, err := os.Open(liveMCPBenchPath)
	if os.IsNotExist(err) {
		t.Logf("LiveMCPBench tools not found at %s; checking the other stubs only", liveMCPBenchPath)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	index := map[string]int{}
	var out []Server
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var ft fixtureTool
		if err := json.Unmarshal(sc.Bytes(), &ft); err != nil {
			t.Fatalf("%s: %v", liveMCPBenchPath, err)
		}
		i, ok := index[ft.Server]
		if !ok {
			i = len(out)
			index[ft.Server] = i
			out = append(out, Server{Name: ft.Server})
		}
		out[i].Tools = append(out[i].Tools, ft.tool())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func countTools(servers []Server) int {
	n := 0
	for _, s := range servers {
		n += len(s.Tools)
	}
	return n
}
