package mcpface

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	pathpkg "path"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/internal/textmime"
	"github.com/cexec/cexec/pluginapi"
)

// Attachment kinds (Attachment.Kind).
const (
	AttachImage    = "image"
	AttachAudio    = "audio"
	AttachResource = "resource"
	// AttachSaved is an attachment saved in the tenant's workspace: the
	// agent gets a resource link to WorkspaceURIPrefix + Path.
	AttachSaved = "saved"
)

// WorkspaceURITemplate serves saved attachments: cexec://workspace/<path>,
// the path relative to the tenant's workspace.
const (
	WorkspaceURITemplate = "cexec://workspace/{+path}"
	WorkspaceURIPrefix   = "cexec://workspace/"
	attachmentURIPrefix  = "cexec://attachment/"
)

// Attachment is content an execution hands to the agent beside its text:
// what a program showed (cexec.show) or a tool's non-text content.
type Attachment struct {
	Kind     string
	MIMEType string
	// Name is what the program called it; URI a resource's own URI.
	Name string
	URI  string
	// Text is a text resource's text, Data binary content.
	Text string
	Data []byte
	// Path is a saved attachment's path in the workspace; Size its bytes.
	Path string
	Size int64
}

// AttachmentInfo is an attachment as structuredContent describes it.
type AttachmentInfo struct {
	Kind     string `json:"kind"`
	MIMEType string `json:"mime_type"`
	Name     string `json:"name,omitempty"`
	Size     int64  `json:"size"`
	URI      string `json:"uri,omitempty"`
}

// AttachmentStore reads a tenant's saved attachments.
type AttachmentStore interface {
	// ReadAttachment returns the file at path (relative to the tenant's
	// workspace) when it is a saved attachment; others wrap
	// pluginapi.ErrNotFound.
	ReadAttachment(ctx context.Context, sc Scope, path string) ([]byte, error)
}

// info describes a for structuredContent and the reply's text.
func (a *Attachment) info() AttachmentInfo {
	in := AttachmentInfo{Kind: a.Kind, MIMEType: a.MIMEType, Name: a.Name, Size: a.Size, URI: a.URI}
	if a.Kind == AttachSaved {
		in.URI = WorkspaceURIPrefix + a.Path
	}
	return in
}

// describe is a's line in the reply's text.
func (a *Attachment) describe() string {
	in := a.info()
	what := in.MIMEType + " " + bytesize.Format(in.Size)
	if in.Name != "" {
		what = in.Name + ", " + what
	}
	if a.Kind == AttachSaved {
		return fmt.Sprintf("[saved: %s; read %s]", what, in.URI)
	}
	return fmt.Sprintf("[attached: %s]", what)
}

// content is a as MCP content: images and audio as themselves, resources
// embedded, saved attachments as resource links.
func (a *Attachment) content(i int) mcp.Content {
	switch a.Kind {
	case AttachImage:
		return mcp.NewImageContent(base64.StdEncoding.EncodeToString(a.Data), a.MIMEType)
	case AttachAudio:
		return mcp.NewAudioContent(base64.StdEncoding.EncodeToString(a.Data), a.MIMEType)
	case AttachSaved:
		name := a.Name
		if name == "" {
			name = a.Path[strings.LastIndexByte(a.Path, '/')+1:]
		}
		link := mcp.NewResourceLink(WorkspaceURIPrefix+a.Path, name, "", a.MIMEType)
		link.Size = &a.Size
		return link
	}
	uri := a.URI
	if uri == "" {
		uri = fmt.Sprintf("%s%d", attachmentURIPrefix, i+1)
	}
	if a.Data != nil {
		return mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: uri, MIMEType: a.MIMEType, Blob: base64.StdEncoding.EncodeToString(a.Data)})
	}
	return mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uri, MIMEType: a.MIMEType, Text: a.Text})
}

// tokenizeAttachments tokenizes the attachments' texts, names and URIs for
// a reply that is not tokenized yet; binary data is not scanned.
func (f *Face) tokenizeAttachments(ctx context.Context, sc Scope, atts []Attachment) ([]Attachment, error) {
	out := make([]Attachment, len(atts))
	for i, a := range atts {
		for _, p := range []*string{&a.Text, &a.Name, &a.URI} {
			if *p == "" {
				continue
			}
			t, err := f.o.PII.Tokenize(ctx, sc, *p)
			if err != nil {
				return nil, err
			}
			*p = t
		}
		out[i] = a
	}
	return out, nil
}

const noAttachment = "no saved attachment there"

// findWorkspace is readWorkspace's lookup: the file is read (no more), not
// tokenized.
func (f *Face) findWorkspace(ctx context.Context, uri string) string {
	sc, err := f.scope(ctx)
	if err != nil {
		return ""
	}
	if _, err := f.o.Attachments.ReadAttachment(ctx, sc, strings.TrimPrefix(uri, WorkspaceURIPrefix)); errors.Is(err, pluginapi.ErrNotFound) {
		return noAttachment
	}
	return ""
}

// readWorkspace serves cexec://workspace/<path>: the scope's tenant's saved
// attachments only. Text types are tokenized as other resources are.
func (f *Face) readWorkspace(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	sc, err := f.scope(ctx)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	path := strings.TrimPrefix(uri, WorkspaceURIPrefix)
	data, err := f.o.Attachments.ReadAttachment(ctx, sc, path)
	if errors.Is(err, pluginapi.ErrNotFound) {
		return nil, notFound{uri, noAttachment}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	mimeType := mime.TypeByExtension(pathpkg.Ext(path))
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	// Text is tokenized; so is anything that reads as text whatever its
	// name says, so that no text leaves unscanned.
	if textmime.Is(mimeType) || utf8.Valid(data) {
		if !textmime.Is(mimeType) {
			mimeType = "text/plain"
		}
		return f.textContents(ctx, sc, uri, mimeType, string(data))
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: mimeType, Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}
