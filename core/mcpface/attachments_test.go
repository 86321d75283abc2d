package mcpface

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi"
)

// showExecutor is an Executor whose every execution shows atts.
type showExecutor struct{ atts []Attachment }

func (e showExecutor) Execute(context.Context, Scope, Program) (Execution, error) {
	return Execution{Stdout: "done\n", Attachments: e.atts}, nil
}

// tenantFiles is an AttachmentStore of files by tenant and path.
type tenantFiles struct {
	mu    sync.Mutex
	files map[string]map[string][]byte
	asked []string
}

func (s *tenantFiles) ReadAttachment(_ context.Context, sc Scope, path string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, sc.Tenant+":"+path)
	data, ok := s.files[sc.Tenant][path]
	if !ok {
		return nil, fmt.Errorf("no %s: %w", path, pluginapi.ErrNotFound)
	}
	return data, nil
}

// TestExecuteCodeAttachments checks how execute_code returns attachments:
// an image and an embedded text resource (its text and name tokenized)
// inline, a saved one as a resource link the face serves from the
// tenant's store, described in the text and in structuredContent.
func TestExecuteCodeAttachments(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	store := &tenantFiles{files: map[string]map[string][]byte{"default": {
		"attachments/s/ab-report.csv": []byte("name,mail\nJane,jane@example.com\n"),
		"attachments/s/cd-blob.bin":   {0xff, 0x00, 0xfe},
	}}}
	ex := showExecutor{atts: []Attachment{
		{Kind: AttachImage, MIMEType: "image/png", Data: png, Size: int64(len(png))},
		{Kind: AttachResource, MIMEType: "text/plain", Name: "to jane@example.com", Text: "mail jane@example.com", Size: 21},
		{Kind: AttachSaved, MIMEType: "text/csv", Name: "report.csv", Path: "attachments/s/ab-report.csv", Size: 31},
		{Kind: AttachSaved, MIMEType: "application/octet-stream", Path: "attachments/s/cd-blob.bin", Size: 3},
	}}
	w := newWorld(t, func(o *Options, _ *world) { o.Executor, o.Attachments = ex, store })
	c := connect(t, w.url+"/mcp")
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "show()"})
	want := "done\n[attached: image/png 12 B]\n[attached: to [EMAIL_1], text/plain 21 B]\n" +
		"[saved: report.csv, text/csv 31 B; read cexec://workspace/attachments/s/ab-report.csv]\n" +
		"[saved: application/octet-stream 3 B; read cexec://workspace/attachments/s/cd-blob.bin]\n"
	if text != want {
		t.Errorf("text:\n%s\nwant:\n%s", text, want)
	}
	if len(res.Content) != 5 {
		t.Fatalf("content %+v", res.Content)
	}
	img, ok := res.Content[1].(mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || img.Data != base64.StdEncoding.EncodeToString(png) {
		t.Errorf("image %+v", res.Content[1])
	}
	emb, ok := res.Content[2].(mcp.EmbeddedResource)
	if tr, _ := emb.Resource.(mcp.TextResourceContents); !ok || tr.Text != "mail [EMAIL_1]" || tr.URI != "cexec://attachment/2" {
		t.Errorf("embedded %+v", res.Content[2])
	}
	link, ok := res.Content[3].(mcp.ResourceLink)
	if !ok || link.URI != "cexec://workspace/attachments/s/ab-report.csv" || link.Name != "report.csv" || link.Size == nil || *link.Size != 31 {
		t.Fatalf("link %+v", res.Content[3])
	}
	if !strings.Contains(fmt.Sprint(res.StructuredContent), "attachments") {
		t.Errorf("structuredContent says nothing of the attachments: %v", res.StructuredContent)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	read := func(uri string) ([]mcp.ResourceContents, error) {
		r, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		if err != nil {
			return nil, err
		}
		return r.Contents, nil
	}
	got, err := read(link.URI)
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := got[0].(mcp.TextResourceContents); !ok || tr.Text != "name,mail\nJane,[EMAIL_1]\n" || !strings.HasPrefix(tr.MIMEType, "text/csv") {
		t.Errorf("saved text %+v", got[0])
	}
	got, err = read(res.Content[4].(mcp.ResourceLink).URI)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := got[0].(mcp.BlobResourceContents); !ok || b.Blob != base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}) {
		t.Errorf("saved blob %+v", got[0])
	}
	if _, err := read("cexec://workspace/attachments/s/missing.png"); err == nil || !strings.Contains(err.Error(), "no saved attachment") {
		t.Errorf("missing attachment: %v", err)
	}
	for _, a := range store.asked {
		if !strings.HasPrefix(a, "default:") {
			t.Errorf("store asked for %s, not the scope's tenant", a)
		}
	}
}
