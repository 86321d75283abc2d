package catalog

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/config"
)

// secretMask replaces the config's secrets (config.Config.Secrets) in what
// upstream servers return and print: a server given a token may echo it
// (server-everything's get-env lists its environment), and from there it
// would reach sandboxes, session logs, the model and cexecd's log. A nil
// mask masks nothing.
type secretMask struct{ *config.SecretMask }

// newSecretMask is the mask of secrets; nil when none.
func newSecretMask(secrets []string) *secretMask {
	m := config.NewSecretMask(secrets)
	if m == nil {
		return nil
	}
	return &secretMask{m}
}

func (m *secretMask) string(s string) string {
	if m == nil {
		return s
	}
	return m.Replace(s)
}

func (m *secretMask) raw(b json.RawMessage) json.RawMessage {
	if m == nil {
		return b
	}
	return m.ReplaceJSON(b)
}

// result masks res in place: its texts, text resources and structured
// content. Binary content is left as it is.
func (m *secretMask) result(res *mcp.CallToolResult) {
	if m == nil || res == nil {
		return
	}
	for i, c := range res.Content {
		res.Content[i] = m.content(c)
	}
	res.RawStructuredContent = m.raw(res.RawStructuredContent)
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			if masked := m.raw(b); string(masked) != string(b) {
				var v any
				if json.Unmarshal(masked, &v) == nil {
					res.StructuredContent = v
				}
			}
		}
	}
}

// resource masks a resources/read result in place.
func (m *secretMask) resource(res *mcp.ReadResourceResult) {
	if m == nil || res == nil {
		return
	}
	for i, c := range res.Contents {
		res.Contents[i] = m.resourceContents(c)
	}
}

func (m *secretMask) content(c mcp.Content) mcp.Content {
	switch t := c.(type) {
	case mcp.TextContent:
		t.Text = m.string(t.Text)
		return t
	case *mcp.TextContent:
		t.Text = m.string(t.Text)
	case mcp.EmbeddedResource:
		t.Resource = m.resourceContents(t.Resource)
		return t
	case *mcp.EmbeddedResource:
		t.Resource = m.resourceContents(t.Resource)
	}
	return c
}

func (m *secretMask) resourceContents(c mcp.ResourceContents) mcp.ResourceContents {
	switch t := c.(type) {
	case mcp.TextResourceContents:
		t.Text = m.string(t.Text)
		return t
	case *mcp.TextResourceContents:
		t.Text = m.string(t.Text)
	}
	return c
}

// err masks err's message; errors.Is and errors.As still see err. A
// server's JSON-RPC error, or a connection error quoting its reply, may
// echo a secret as a result may.
func (m *secretMask) err(err error) error {
	if m == nil || err == nil {
		return err
	}
	if msg := m.string(err.Error()); msg != err.Error() {
		return &maskedError{msg: msg, err: err}
	}
	return err
}

// maskedError is an error whose message had a config secret in it.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// prompt masks a prompts/get result in place.
func (m *secretMask) prompt(res *mcp.GetPromptResult) {
	if m == nil || res == nil {
		return
	}
	res.Description = m.string(res.Description)
	for i := range res.Messages {
		res.Messages[i].Content = m.content(res.Messages[i].Content)
	}
}
