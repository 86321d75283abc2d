package workspace

import "encoding/json"

// UpstreamLog is a log message (notifications/message) an upstream MCP
// server sent during one of an execution's tool calls. It is kept in the
// session log, never shown to the model.
type UpstreamLog struct {
	Server string `json:"server"`
	Level  string `json:"level"`
	Logger string `json:"logger,omitempty"`
	// Data is the message as the server sent it, as JSON; dropped when
	// over 4 KiB (Truncated).
	Data      json.RawMessage `json:"data,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// Withheld is set when the message could not be checked for PII (a
	// model-facing execution's log keeps the tokenized form only).
	Withheld bool `json:"withheld,omitempty"`
}
