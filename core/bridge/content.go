package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// Keys of the envelopes a result value may travel in. A result with content
// other than text (images, audio, embedded resources, resource links) is
// {ContentKey: [MCP content items]}, which the runtime turns into typed
// Python objects (cexec.Image, ...). A value that is itself an object with
// one key starting "$cexec." is wrapped as {ValueKey: value}, so that
// no upstream value is ever mistaken for an envelope.
const (
	ContentKey = "$cexec.content"
	ValueKey   = "$cexec.value"
)

var envelopePrefix = []byte(`"$cexec.`)

// escapeValue wraps v when it could be read as an envelope.
func escapeValue(v json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, envelopePrefix) {
		return v, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil || len(m) != 1 {
		return v, nil
	}
	for k := range m {
		if !bytes.HasPrefix([]byte(`"`+k), envelopePrefix) {
			return v, nil
		}
	}
	return json.Marshal(map[string]json.RawMessage{ValueKey: t})
}

// contentEnvelope is a rich result's items as the runtime reads them.
func contentEnvelope(items []mcp.Content) (json.RawMessage, error) {
	return json.Marshal(map[string][]mcp.Content{ContentKey: items})
}

// Unwrap reads a call_tool value as a client outside Python would: value is
// the plain JSON value (envelopes removed), or, for a rich result, nil with
// content holding the result's items.
func Unwrap(raw json.RawMessage) (value json.RawMessage, content []mcp.Content, err error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, envelopePrefix) {
		return raw, nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil || len(m) != 1 {
		return raw, nil, nil
	}
	if v, ok := m[ValueKey]; ok {
		return v, nil, nil
	}
	items, ok := m[ContentKey]
	if !ok {
		return raw, nil, nil
	}
	var list []map[string]any
	if err := json.Unmarshal(items, &list); err != nil {
		return nil, nil, fmt.Errorf("read rich result: %w", err)
	}
	for _, it := range list {
		c, err := mcp.ParseContent(it)
		if err != nil {
			return nil, nil, fmt.Errorf("read rich result: %w", err)
		}
		content = append(content, c)
	}
	return nil, content, nil
}
