package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cexec/cexec/core/auth"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/internal/schemamsg"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestDescribe(t *testing.T) {
	const schema = `{
		"type": "object",
		"properties": {
			"path": {"type": "string"},
			"mode": {"enum": ["r", "w"]},
			"count": {"type": "integer", "minimum": 1},
			"tags": {"type": "array", "items": {"type": "string", "pattern": "^(?!tmp)[a-z]+$"}},
			"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"], "additionalProperties": false},
			"a/b": {"type": "string"},
			"item": {"$ref": "#/$defs/item"}
		},
		"$defs": {"item": {"type": "object", "properties": {"id": {"type": "integer"}}}},
		"required": ["path"],
		"additionalProperties": false
	}`
	sch, err := compileSchema("t/t", []byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ args, want string }{
		{`{"path": 5}`, `argument "path": expected string, got number`},
		{`{}`, `missing required argument "path"`},
		{`{"path": "x", "colour": 1, "size": 2}`, `unexpected arguments "colour", "size"`},
		{`{"path": "x", "mode": "a"}`, `argument "mode": must be one of "r", "w"; got "a"`},
		{`{"path": "x", "count": 0}`, `argument "count": must be at least 1, got 0`},
		{`{"path": "x", "count": 1.5}`, `argument "count": expected integer, got number`},
		{`{"path": "x", "tags": ["ok", "tmpdir"]}`, `argument "tags" at /tags/1: `},
		{`{"path": "x", "opts": {"deep": 1}}`, `argument "opts": missing required property "depth"; argument "opts": unexpected property "deep"`},
		{`{"path": "x", "a/b": 1}`, `argument "a/b": expected string, got number`},
		{`{"path": "x", "item": {"id": "7"}}`, `argument "item" at /item/id: expected integer, got string`},
		{`{"path": 1, "mode": "x", "count": 0, "opts": 2}`, `and 1 more`},
	} {
		t.Run(tt.args, func(t *testing.T) {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			var verr *jsonschema.ValidationError
			if !errors.As(sch.Validate(inst), &verr) {
				t.Fatal("valid, want an error")
			}
			if got := schemamsg.Describe(verr); !strings.Contains(got, tt.want) {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	if inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"path": "x", "tags": ["abc"], "opts": {"depth": 2}}`)); sch.Validate(inst) != nil {
		t.Error("valid arguments rejected")
	}
}

func TestSchemasNeverLoadAnything(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "https://example.com/schema.json", "/etc/hostname"} {
		_, err := compileSchema("t/t", []byte(`{"type":"object","properties":{"x":{"$ref":"`+ref+`"}}}`))
		if err == nil {
			t.Errorf("$ref %s compiled; the compiler must not load external documents", ref)
		}
	}
	if _, err := compileSchema("t/t", []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)); err != nil {
		t.Errorf("draft-07 metaschema: %v", err)
	}
}

func TestDecodeResult(t *testing.T) {
	text := func(s string) mcp.Content { return mcp.TextContent{Type: "text", Text: s} }
	img := mcp.ImageContent{Type: "image", MIMEType: "image/png", Data: "iVBOR"}
	res := mcp.EmbeddedResource{Type: "resource", Resource: mcp.TextResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "A"}}
	blob := mcp.EmbeddedResource{Type: "resource", Resource: mcp.BlobResourceContents{URI: "file:///a.bin", MIMEType: "application/octet-stream", Blob: "AAE="}}
	link := mcp.ResourceLink{Type: "resource_link", URI: "file:///b", Name: "b", MIMEType: "text/plain"}
	for _, tt := range []struct {
		name string
		res  mcp.CallToolResult
		want string
		err  string
	}{
		{"structured wins", mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{"n": 12345678901234567890}`), Content: []mcp.Content{text("ignored")}}, `{"n": 12345678901234567890}`, ""},
		{"structured without raw", mcp.CallToolResult{StructuredContent: map[string]any{"a": 1}}, `{"a":1}`, ""},
		{"json text", mcp.CallToolResult{Content: []mcp.Content{text(` [1, 2] `)}}, `[1, 2]`, ""},
		{"plain text", mcp.CallToolResult{Content: []mcp.Content{text("hello")}}, `"hello"`, ""},
		{"empty text", mcp.CallToolResult{Content: []mcp.Content{text("")}}, `""`, ""},
		{"texts joined", mcp.CallToolResult{Content: []mcp.Content{text("a"), text("{}")}}, `"a\n{}"`, ""},
		{"no content", mcp.CallToolResult{}, `null`, ""},
		{"image alone", mcp.CallToolResult{Content: []mcp.Content{img}}, `{"$cexec.content":[{"type":"image","data":"iVBOR","mimeType":"image/png"}]}`, ""},
		{"mixed", mcp.CallToolResult{Content: []mcp.Content{text("see"), img}}, `{"$cexec.content":[{"type":"text","text":"see"},{"type":"image","data":"iVBOR","mimeType":"image/png"}]}`, ""},
		{"resources", mcp.CallToolResult{Content: []mcp.Content{res, blob, link}},
			`{"$cexec.content":[{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"A"}},{"type":"resource","resource":{"uri":"file:///a.bin","mimeType":"application/octet-stream","blob":"AAE="}},{"type":"resource_link","uri":"file:///b","name":"b","description":"","mimeType":"text/plain"}]}`, ""},
		{"value like an envelope is escaped", mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{"$cexec.content": 1}`)}, `{"$cexec.value":{"$cexec.content":1}}`, ""},
		{"text like an envelope is escaped", mcp.CallToolResult{Content: []mcp.Content{text(`{"$cexec.value":2}`)}}, `{"$cexec.value":{"$cexec.value":2}}`, ""},
		{"object with more keys is not escaped", mcp.CallToolResult{Content: []mcp.Content{text(`{"$cexec.value":2,"b":3}`)}}, `{"$cexec.value":2,"b":3}`, ""},
		{"isError", mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("no such file"), text("really")}}, "", "ToolError: no such file\nreally"},
		{"isError silent", mcp.CallToolResult{IsError: true}, "", "without a message"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := decodeResult(&tt.res)
			if tt.err != "" {
				var ce *sandbox.CallError
				if !errors.As(err, &ce) || !strings.Contains(ce.Error(), tt.err) {
					t.Fatalf("err = %v, want a CallError containing %q", err, tt.err)
				}
				return
			}
			if err != nil || !bytes.Equal(out, []byte(tt.want)) {
				t.Errorf("got %s, %v\nwant %s", out, err, tt.want)
			}
		})
	}
}

// TestUnwrap reads results back as the face's call_tool does.
func TestUnwrap(t *testing.T) {
	for _, tt := range []struct {
		name, raw, value string
		kinds            []string
	}{
		{"plain", `{"a":1}`, `{"a":1}`, nil},
		{"escaped", `{"$cexec.value":{"$cexec.content":1}}`, `{"$cexec.content":1}`, nil},
		{"content", `{"$cexec.content":[{"type":"text","text":"see"},{"type":"image","data":"iVBOR","mimeType":"image/png"}]}`, ``, []string{"mcp.TextContent", "mcp.ImageContent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, content, err := Unwrap(json.RawMessage(tt.raw))
			if err != nil || string(v) != tt.value {
				t.Fatalf("value %s, %v; want %s", v, err, tt.value)
			}
			var kinds []string
			for _, c := range content {
				kinds = append(kinds, fmt.Sprintf("%T", c))
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tt.kinds) {
				t.Errorf("content %v, want %v", kinds, tt.kinds)
			}
		})
	}
}

func TestCallErrorMapping(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{live, fmt.Errorf("call a/b: %w after 1s", catalog.ErrTimeout), TypeTimeout},
		{live, fmt.Errorf("call a/b: %w", catalog.ErrConnectionLost), TypeUnavailable},
		{live, fmt.Errorf("call a/b: %w", catalog.ErrUnavailable), TypeUnavailable},
		{live, fmt.Errorf("call a/b: %w", catalog.ErrUnknownServer), TypeToolNotFound},
		{live, fmt.Errorf("call a/b: %w: server a: %w", catalog.ErrUnavailable, &auth.SignInRequiredError{Server: "a", Tenant: "t", Reason: "not signed in"}), TypeSignInRequired},
		{live, errors.New("call a/b: invalid params: bad"), TypeToolError},
		{dead, fmt.Errorf("call a/b: %w", context.Canceled), ""},
	} {
		err := callError(tt.ctx, tt.err)
		var ce *sandbox.CallError
		switch {
		case tt.want == "" && !errors.Is(err, context.Canceled):
			t.Errorf("%v: got %v, want the context's error", tt.err, err)
		case tt.want != "" && (!errors.As(err, &ce) || ce.Type != tt.want || ce.Message != tt.err.Error()):
			t.Errorf("%v: got %v, want %s", tt.err, err, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"read_text_file", "read_media_file", "write_file", "list_directory"}
	for _, tt := range []struct{ in, want string }{
		{"read_txt_file", "read_text_file"},
		{"Write_File", "write_file"},
		{"list_dir", ""},
		{"delete_everything", ""},
	} {
		if got := closest(tt.in, names); got != tt.want {
			t.Errorf("closest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
