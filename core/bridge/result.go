package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// decodeResult turns an upstream tools/call result into the value
// call_tool returns in Python (ARCHITECTURE §6):
//
//   - isError: a ToolError carrying the server's message;
//   - structuredContent, as received, when present;
//   - one text content: its JSON value if the text is JSON, else the text;
//   - several text contents: the texts joined by newlines;
//   - no content: None;
//   - any image, audio, embedded resource or resource link: the items in a
//     ContentKey envelope, which the runtime turns into cexec.Image,
//     cexec.Audio, cexec.Resource and cexec.ResourceLink objects (texts as
//     str; one item alone, several as a list).
//
// A value that could be read as an envelope is escaped (escapeValue).
func decodeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.IsError {
		return nil, &sandbox.CallError{Type: TypeToolError, Message: errorMessage(res)}
	}
	if sc := bytes.TrimSpace(res.RawStructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		return escapeValue(res.RawStructuredContent)
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		return escapeValue(raw)
	}
	var texts []string
	for _, c := range res.Content {
		t, ok := c.(mcp.TextContent)
		if !ok {
			return contentEnvelope(res.Content)
		}
		texts = append(texts, t.Text)
	}
	switch len(texts) {
	case 0:
		return json.RawMessage("null"), nil
	case 1:
		if t := strings.TrimSpace(texts[0]); t != "" && json.Valid([]byte(t)) {
			return escapeValue(json.RawMessage(t))
		}
		return json.Marshal(texts[0])
	}
	return json.Marshal(strings.Join(texts, "\n"))
}

// errorMessage is what a tool that reported isError said.
func errorMessage(res *mcp.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok && strings.TrimSpace(t.Text) != "" {
			texts = append(texts, t.Text)
		}
	}
	if len(texts) > 0 {
		return strings.Join(texts, "\n")
	}
	if len(res.RawStructuredContent) > 0 {
		return string(res.RawStructuredContent)
	}
	if res.StructuredContent != nil {
		return fmt.Sprint(res.StructuredContent)
	}
	return "the tool reported an error without a message"
}
