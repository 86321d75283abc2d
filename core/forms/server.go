package forms

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/form"

	"github.com/cexec/cexec/internal/version"
)

// Name is the built-in server's name in cexec.hcl and the catalog.
const Name = "forms"

const pathProp = `{"type": "string", "description": "a PDF in the workspace: relative to it, or absolute under /workspace"}`

var (
	fieldsSchema = json.RawMessage(`{"type": "object", "required": ["path"], "additionalProperties": false,
  "properties": {"path": ` + pathProp + `}}`)
	fillSchema = json.RawMessage(`{"type": "object", "required": ["path", "values", "out"], "additionalProperties": false,
  "properties": {
    "path": ` + pathProp + `,
    "values": {"type": "object", "description": "field name to value: a string (text, date, radio, combobox), true or false (checkbox), a list of strings (listbox)",
      "additionalProperties": {"type": ["string", "boolean", "array"], "items": {"type": "string"}}},
    "out": {"type": "string", "description": "where the filled PDF is written in the workspace (replaced if it exists)"}}}`)
	readSchema = fieldsSchema
)

// NewServer returns the forms MCP server of the tenant whose workspace ws
// resolves.
func NewServer(ws Resolver) *server.MCPServer {
	// It runs in cexecd on files tenants write: a handler's panic (a PDF
	// parser bug) must fail its call, not cexecd.
	s := server.NewMCPServer("cexec-forms", version.Version, server.WithToolCapabilities(false), server.WithRecovery())
	h := handlers{ws: ws}
	s.AddTool(mcp.NewToolWithRawSchema("pdf_fields",
		"List the fields of a PDF form (AcroForm) in the workspace: name, type (text, date, checkbox, radio, combobox, listbox), label, current value, default and options.",
		fieldsSchema), h.fields)
	s.AddTool(mcp.NewToolWithRawSchema("fill_pdf",
		"Fill a PDF form in the workspace: set the given fields by name and write the filled copy to out. Values are checked against each field's type and options.",
		fillSchema), h.fill)
	s.AddTool(mcp.NewToolWithRawSchema("read_pdf",
		"Read back the values of a PDF form's fields in the workspace, by field name.",
		readSchema), h.read)
	return s
}

type handlers struct{ ws Resolver }

// open resolves the call's workspace and opens it as a root.
func (h handlers) open() (*os.Root, Workspace, error) {
	ws, err := h.ws()
	if err != nil {
		return nil, ws, fmt.Errorf("workspace: %w", err)
	}
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return nil, ws, fmt.Errorf("workspace: %w", err)
	}
	return root, ws, nil
}

// load reads the form at the path argument; rel is that path in the
// workspace.
func (h handlers) load(req mcp.CallToolRequest) (root *os.Root, ws Workspace, rel string, pdf []byte, err error) {
	if rel, err = relPath("path", req.GetString("path", "")); err != nil {
		return nil, Workspace{}, "", nil, err
	}
	if root, ws, err = h.open(); err != nil {
		return nil, ws, "", nil, err
	}
	if pdf, err = readFile(root, "path", rel); err != nil {
		root.Close()
		return nil, ws, "", nil, err
	}
	return root, ws, rel, pdf, nil
}

func (h handlers) fields(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return h.report(req, "fields", func(f *form.Form) any { return fields(f) })
}

func (h handlers) read(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return h.report(req, "values", func(f *form.Form) any { return values(f) })
}

// report reads the request's PDF form and returns what of answers under key.
func (h handlers) report(req mcp.CallToolRequest, key string, of func(*form.Form) any) (*mcp.CallToolResult, error) {
	root, _, rel, pdf, err := h.load(req)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	root.Close()
	g, err := exportForm(rel, pdf)
	if err != nil {
		return mcp.NewToolResultError("path: " + err.Error()), nil
	}
	return structured(map[string]any{key: of(&g.Forms[0])})
}

func (h handlers) fill(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Values map[string]json.RawMessage `json:"values"`
		Out    string                     `json:"out"`
	}
	if err := req.BindArguments(&args); err != nil {
		return mcp.NewToolResultError("arguments: " + err.Error()), nil
	}
	out, err := relPath("out", args.Out)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	root, ws, rel, pdf, err := h.load(req)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	defer root.Close()
	filled, names, err := fill(rel, pdf, args.Values)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if err := writeFile(root, ws, out, filled); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return structured(map[string]any{"out": args.Out, "filled": names})
}

// structured returns v as structuredContent with its JSON as the text.
func structured(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructured(v, string(b)), nil
}
