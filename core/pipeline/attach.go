package pipeline

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/internal/textmime"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// MethodShow is the runtime's host call for cexec.show.
const MethodShow = "show"

// Attachment kinds: content the agent gets beside an execution's text.
const (
	AttachImage    = "image"
	AttachAudio    = "audio"
	AttachResource = "resource"
	// AttachSaved is content too large to travel inline, saved in the
	// tenant's workspace (Path); the agent gets a resource link to it.
	AttachSaved = "saved"
)

// DefaultMaxInlineAttachment is the largest attachment returned inline when
// the Executor sets no MaxInlineAttachment.
const DefaultMaxInlineAttachment = 1 << 20

// maxInlineFactor bounds all inline attachments of one execution together
// (as a multiple of the per-attachment size): the rest are saved.
const maxInlineFactor = 4

// maxAttachments bounds the attachments of one execution.
const maxAttachments = 100

// Attachment is content an execution hands to the agent: what a program
// showed (cexec.show), or a tool's non-text content for the MCP face's
// call_tool.
type Attachment struct {
	// Kind is one of the Attach* constants.
	Kind     string `json:"kind"`
	MIMEType string `json:"mime_type"`
	// Name is what the program called it, if anything.
	Name string `json:"name,omitempty"`
	// URI is a resource's own URI, if it has one.
	URI string `json:"uri,omitempty"`
	// Text is a text resource's text (tokenized for a model-facing request,
	// like printed output); Data is binary content, never scanned.
	Text string `json:"text,omitempty"`
	Data []byte `json:"data,omitempty"`
	// Path is a saved attachment's place in the workspace
	// (workspace.AttachmentsDir/<session>/<file>); Size its size in bytes.
	Path string `json:"path,omitempty"`
	Size int64  `json:"size"`
}

// attachments collects one execution's attachments: small ones inline, the
// rest saved in the tenant's workspace.
type attachments struct {
	tenant  *workspace.Tenant
	session string
	max     int64

	mu     sync.Mutex
	items  []Attachment
	inline int64
}

func newAttachments(t *workspace.Tenant, session string, max int64) *attachments {
	if max <= 0 {
		max = DefaultMaxInlineAttachment
	}
	return &attachments{tenant: t, session: session, max: max}
}

// add keeps a, inline when it fits, else saved; it returns the saved
// attachment's path in the workspace ("" when inline).
func (c *attachments) add(a Attachment) (string, error) {
	size := int64(len(a.Data) + len(a.Text))
	a.Size = size
	c.mu.Lock()
	if len(c.items) >= maxAttachments {
		c.mu.Unlock()
		return "", &sandbox.CallError{Type: "ValueError", Message: fmt.Sprintf(
			"show: an execution hands at most %d items to the agent; save the rest in /workspace", maxAttachments)}
	}
	if size <= c.max && c.inline+size <= maxInlineFactor*c.max {
		c.inline += size
		c.items = append(c.items, a)
		c.mu.Unlock()
		return "", nil
	}
	c.mu.Unlock()
	if c.tenant == nil {
		return "", &sandbox.CallError{Type: "ValueError", Message: "show: content this large has no workspace to be saved in"}
	}
	data := a.Data
	if a.Data == nil {
		data = []byte(a.Text)
	}
	name := a.Name
	if name == "" {
		name = a.Kind
	}
	// The extension says the type to whoever reads the file back (the MCP
	// face serves it by its name).
	if exts, _ := mime.ExtensionsByType(a.MIMEType); len(exts) > 0 && !slices.Contains(exts, strings.ToLower(path.Ext(name))) {
		if a.MIMEType == "text/plain" {
			exts[0] = ".txt" // not .asc, which comes first
		}
		name += exts[0]
	}
	rel, err := c.tenant.SaveAttachment(c.session, name, data)
	if err != nil {
		if errors.Is(err, workspace.ErrQuotaExceeded) {
			return "", &sandbox.CallError{Type: "QuotaExceeded", Message: "show: " + err.Error()}
		}
		return "", fmt.Errorf("save attachment: %w", err)
	}
	saved := Attachment{Kind: AttachSaved, MIMEType: a.MIMEType, Name: a.Name, URI: a.URI, Path: rel, Size: size}
	c.mu.Lock()
	c.items = append(c.items, saved)
	c.mu.Unlock()
	return rel, nil
}

func (c *attachments) list() []Attachment {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.items)
}

// showParams are the params of the runtime's show host call.
type showParams struct {
	Kind     string  `json:"kind"`
	MIMEType string  `json:"mimeType"`
	Name     string  `json:"name"`
	URI      string  `json:"uri"`
	Text     *string `json:"text"`
	Data     *string `json:"data"`
}

// show serves cexec.show: the item joins the execution's attachments. The
// reply is {"path": "/workspace/..."} for an item saved in the workspace.
func (c *attachments) show(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
	var p showParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &sandbox.CallError{Type: "ValueError", Message: fmt.Sprintf("show: malformed params: %v", err)}
	}
	a := Attachment{Kind: p.Kind, MIMEType: strings.TrimSpace(p.MIMEType), Name: p.Name, URI: p.URI}
	switch p.Kind {
	case AttachImage, AttachAudio, AttachResource:
	default:
		return nil, &sandbox.CallError{Type: "ValueError", Message: fmt.Sprintf("show: unknown kind %q (image, audio or resource)", p.Kind)}
	}
	if a.MIMEType == "" {
		a.MIMEType = "application/octet-stream"
	}
	switch {
	case p.Text != nil && p.Kind == AttachResource && p.Data == nil:
		a.Text = *p.Text
	case p.Data != nil && p.Text == nil:
		data, err := base64.StdEncoding.DecodeString(*p.Data)
		if err != nil {
			return nil, &sandbox.CallError{Type: "ValueError", Message: fmt.Sprintf("show: data is not base64: %v", err)}
		}
		a.Data = data
	default:
		return nil, &sandbox.CallError{Type: "ValueError", Message: "show: give data (base64), or text for a resource"}
	}
	if a.Kind == AttachResource && a.Data != nil && (textmime.Is(a.MIMEType) || a.MIMEType == "application/octet-stream" && looksLikeText(a.Data)) {
		// Text is shown as text, whatever way it came (bytes with no type,
		// a .log file, a Latin-1 CSV), so that it is checked for PII like
		// printed output: only binary data goes unscanned.
		if !textmime.Is(a.MIMEType) {
			a.MIMEType = "text/plain"
		}
		a.Text, a.Data = string(a.Data), nil
	}
	rel, err := c.add(a)
	if err != nil || rel == "" {
		return json.RawMessage(`{}`), err
	}
	return json.Marshal(map[string]string{"path": workspace.SandboxWorkspace + "/" + rel})
}

// contentAttachment is one MCP content item as an attachment; ok is false
// for text and for items that are not content to show (a resource link
// names an upstream's resource, which the agent cannot read through cexec:
// it is described as text, with the read_resource call that reads it from
// server).
func contentAttachment(server string, c mcp.Content) (a Attachment, text string, ok bool) {
	switch c := c.(type) {
	case mcp.TextContent:
		return a, c.Text, false
	case mcp.ImageContent:
		data, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			return a, fmt.Sprintf("[an image (%s) that is not valid base64]", c.MIMEType), false
		}
		return Attachment{Kind: AttachImage, MIMEType: c.MIMEType, Data: data}, "", true
	case mcp.AudioContent:
		data, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			return a, fmt.Sprintf("[audio (%s) that is not valid base64]", c.MIMEType), false
		}
		return Attachment{Kind: AttachAudio, MIMEType: c.MIMEType, Data: data}, "", true
	case mcp.EmbeddedResource:
		switch r := c.Resource.(type) {
		case mcp.TextResourceContents:
			return Attachment{Kind: AttachResource, MIMEType: r.MIMEType, URI: r.URI, Text: r.Text}, "", true
		case mcp.BlobResourceContents:
			data, err := base64.StdEncoding.DecodeString(r.Blob)
			if err != nil {
				return a, fmt.Sprintf("[resource %s that is not valid base64]", r.URI), false
			}
			return Attachment{Kind: AttachResource, MIMEType: r.MIMEType, URI: r.URI, Data: data}, "", true
		}
	case mcp.ResourceLink:
		desc := c.URI
		if c.Name != "" {
			desc = fmt.Sprintf("%q %s", c.Name, c.URI)
		}
		if c.MIMEType != "" {
			desc += " (" + c.MIMEType + ")"
		}
		return a, fmt.Sprintf("[resource link %s; read it from a program with cexec.read_resource(%q, %q)]", desc, server, c.URI), false
	}
	raw, _ := json.Marshal(c)
	return a, string(raw), false
}

// looksLikeText reports whether data that came without a type is text:
// UTF-8 without control characters but whitespace.
func looksLikeText(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for _, c := range data {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' || c == 0x7f {
			return false
		}
	}
	return true
}
