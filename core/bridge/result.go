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
// call_tool returns in Python (ARCHITECTURE §4):
//
//   - isError: a ToolError carrying the server's message;
//   - structuredContent, as received, when present;
//   - one text content: its JSON value if the text is JSON, else the text;
//   - several text contents: the texts joined by newlines;
//   - images, audio, embedded resources and resource links: dicts
//     ({"type": "image", "mimeType": ..., "data": ...});
//   - text mixed with those: a list, texts as strings;
//   - no content: None.
func decodeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.IsError {
		return nil, &sandbox.CallError{Type: TypeToolError, Message: errorMessage(res)}
	}
	if sc := bytes.TrimSpace(res.RawStructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		return res.RawStructuredContent, nil
	}
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	var texts []string
	allText := true
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			texts = append(texts, t.Text)
		} else {
			allText = false
		}
	}
	switch {
	case len(res.Content) == 0:
		return json.RawMessage("null"), nil
	case allText && len(texts) == 1:
		if t := strings.TrimSpace(texts[0]); t != "" && json.Valid([]byte(t)) {
			return json.RawMessage(t), nil
		}
		return json.Marshal(texts[0])
	case allText:
		return json.Marshal(strings.Join(texts, "\n"))
	case len(res.Content) == 1:
		return json.Marshal(contentValue(res.Content[0]))
	}
	items := make([]any, len(res.Content))
	for i, c := range res.Content {
		items[i] = contentValue(c)
	}
	return json.Marshal(items)
}

// contentValue is one content item as a Python value.
func contentValue(c mcp.Content) any {
	switch c := c.(type) {
	case mcp.TextContent:
		return c.Text
	case mcp.ImageContent:
		return map[string]any{"type": "image", "mimeType": c.MIMEType, "data": c.Data}
	case mcp.AudioContent:
		return map[string]any{"type": "audio", "mimeType": c.MIMEType, "data": c.Data}
	case mcp.EmbeddedResource:
		m := map[string]any{"type": "resource"}
		switch r := c.Resource.(type) {
		case mcp.TextResourceContents:
			m["uri"], m["mimeType"], m["text"] = r.URI, r.MIMEType, r.Text
		case mcp.BlobResourceContents:
			m["uri"], m["mimeType"], m["blob"] = r.URI, r.MIMEType, r.Blob
		}
		return m
	case mcp.ResourceLink:
		m := map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name}
		for k, v := range map[string]string{"title": c.Title, "description": c.Description, "mimeType": c.MIMEType} {
			if v != "" {
				m[k] = v
			}
		}
		return m
	}
	return c // an item mcp-go knows and cexec does not: as mcp-go encodes it
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
