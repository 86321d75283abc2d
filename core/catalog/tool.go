package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/catalog/stubgen"
)

// Tool is one tool in the catalog: an upstream MCP tool or a local tool (a
// function of a hand-written package under the local servers directory).
type Tool struct {
	// ID is "server/name", unique in the catalog.
	ID     string
	Server string
	// Name is the tool's MCP name (for local tools, the function name).
	Name        string
	Title       string
	Description string
	// InputSchema and OutputSchema are the tool's JSON Schemas exactly as the
	// server sent them ($schema and every other keyword included).
	// OutputSchema is nil when the tool declares none; both are nil for local
	// tools.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  stubgen.Annotations
	// Raw is the whole tool object as received in tools/list.
	Raw json.RawMessage
	// Hash identifies this version of the tool (hex SHA-256 of Raw, or of
	// the local tool's module, signature, docstring and source): it changes
	// whenever anything the selector indexes changes.
	Hash string
	// Stub says where the tool lives in the Python tree.
	Stub StubInfo
	// Local is set for local tools, which sandboxed code imports and calls
	// directly; they are not reachable through call_tool.
	Local *LocalInfo
}

// StubInfo is how sandboxed code reaches a tool.
type StubInfo struct {
	// Module is the dotted module that defines the function, e.g.
	// servers.filesystem.read_text_file.
	Module   string
	Function string
	// Import is the statement agent code uses: from servers.fs import read_file.
	Import string
	// Signature is the function signature on one line.
	Signature string
	// Path is the file, relative to the servers directory's parent
	// (servers/filesystem/read_text_file.py); empty until stubs were
	// generated.
	Path string
}

// LocalInfo describes a local tool's source.
type LocalInfo struct {
	// File is the absolute path of the module that defines the function.
	File string
	Line int
	// Source is the function's source code, decorators included.
	Source string
}

// rawTool is the part of a tools/list entry the catalog reads itself.
type rawTool struct {
	Name         string             `json:"name"`
	Title        string             `json:"title"`
	Description  string             `json:"description"`
	InputSchema  json.RawMessage    `json:"inputSchema"`
	OutputSchema json.RawMessage    `json:"outputSchema"`
	Annotations  mcp.ToolAnnotation `json:"annotations"`
}

// parseTools turns the raw tools/list pages of server into tools, keeping
// only the names in accept (the tools mcp-go accepted; it drops some under
// protocol 2026-07-28), in listing order. A tool listed twice keeps its
// first definition.
func parseTools(server string, pages []json.RawMessage, accept map[string]bool) ([]Tool, error) {
	var tools []Tool
	seen := map[string]bool{}
	for _, page := range pages {
		var p struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(page, &p); err != nil {
			return nil, fmt.Errorf("decode tools/list result: %w", err)
		}
		for _, raw := range p.Tools {
			var rt rawTool
			if err := json.Unmarshal(raw, &rt); err != nil {
				return nil, fmt.Errorf("decode tool: %w", err)
			}
			if rt.Name == "" || seen[rt.Name] || (accept != nil && !accept[rt.Name]) {
				continue
			}
			seen[rt.Name] = true
			tools = append(tools, newTool(server, rt, raw))
		}
	}
	return tools, nil
}

func newTool(server string, rt rawTool, raw json.RawMessage) Tool {
	sum := sha256.Sum256(raw)
	t := Tool{
		ID:           server + "/" + rt.Name,
		Server:       server,
		Name:         rt.Name,
		Title:        rt.Title,
		Description:  rt.Description,
		InputSchema:  rawOrNil(rt.InputSchema),
		OutputSchema: rawOrNil(rt.OutputSchema),
		Annotations:  stubgen.Annotations(rt.Annotations),
		Raw:          raw,
		Hash:         hex.EncodeToString(sum[:]),
	}
	if t.Title == "" {
		t.Title = t.Annotations.Title
	}
	return t
}

func rawOrNil(r json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(r)) == 0 || bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
		return nil
	}
	return r
}

// stubgenTool is the stub generator's view of an upstream tool.
func (t *Tool) stubgenTool() stubgen.Tool {
	return stubgen.Tool{
		Name:         t.Name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		OutputSchema: t.OutputSchema,
		Annotations:  t.Annotations,
	}
}

// Change is one update of the catalog, as subscribers receive it.
type Change struct {
	// Reset says the receiver should drop everything it knew first: the
	// first Change a subscriber gets is a Reset with every tool.
	Reset bool
	// Upserts are new or changed tools (by ID and Hash).
	Upserts []Tool
	// Deletes are IDs of tools that are gone.
	Deletes []string
}

func (c Change) empty() bool {
	return !c.Reset && len(c.Upserts) == 0 && len(c.Deletes) == 0
}

// diff is the change from old to new tools of one server.
func diff(old, cur []Tool) Change {
	was := make(map[string]string, len(old))
	for _, t := range old {
		was[t.ID] = t.Hash
	}
	var ch Change
	now := make(map[string]bool, len(cur))
	for _, t := range cur {
		now[t.ID] = true
		if h, ok := was[t.ID]; !ok || h != t.Hash {
			ch.Upserts = append(ch.Upserts, t)
		}
	}
	for _, t := range old {
		if !now[t.ID] {
			ch.Deletes = append(ch.Deletes, t.ID)
		}
	}
	return ch
}
