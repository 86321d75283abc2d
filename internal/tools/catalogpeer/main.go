// Command catalogpeer is a catalog peer, not a real service: an MCP stdio
// server that lists a tool-retrieval set's tool definitions (the
// ../shared/eval format: one {"server", "name", "description",
// "inputSchema"} per line) and answers every call with a canned text. It
// lets `cexecctl bench tokens` connect hundreds of real-world tool
// definitions, as an agent with many MCP servers would see them, without
// running those services.
//
//	catalogpeer -tools ../shared/eval/livemcpbench/tools.jsonl
//
// The set's tools come from many servers and some share a name, so each is
// served as <server>__<name> (characters outside [A-Za-z0-9_.-] become
// "_"), the way MCP hosts prefix tool names with their server's.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// entry is one line of a retrieval set's tools.jsonl.
type entry struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

func main() {
	path := flag.String("tools", "", "tools.jsonl of a tool-retrieval set")
	flag.Parse()
	if err := run(*path); err != nil {
		fmt.Fprintln(os.Stderr, "catalogpeer:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	if path == "" {
		return fmt.Errorf("-tools is required")
	}
	tools, err := load(path)
	if err != nil {
		return err
	}
	s := server.NewMCPServer("catalogpeer", "1", server.WithToolCapabilities(false))
	for _, t := range tools {
		s.AddTool(t, reply)
	}
	return server.ServeStdio(s)
}

// toolName is the name a set's tool is served under.
func toolName(server, name string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r == '_' || r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, server+"__"+name)
}

func load(path string) ([]mcp.Tool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var tools []mcp.Tool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		schema := e.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tools = append(tools, mcp.NewToolWithRawSchema(toolName(e.Server, e.Name), e.Description, schema))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return tools, nil
}

// reply is every tool's answer: plain text, valid for a tool without an
// output schema, saying what was called.
func reply(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, _ := json.Marshal(req.GetArguments())
	return mcp.NewToolResultText(fmt.Sprintf("%s done (catalog peer, canned reply) for %s", req.Params.Name, args)), nil
}
