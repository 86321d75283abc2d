package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	coreguard "github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/core/pool"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// showRunner plays a program that calls cexec.show with each of calls'
// params and prints the host's replies.
type showRunner struct{ calls []string }

func (r *showRunner) Exec(ctx context.Context, _ sandbox.ExecRequest, h sandbox.Host) (sandbox.ExecResult, error) {
	for _, p := range r.calls {
		out, err := h.Call(ctx, MethodShow, json.RawMessage(p))
		if err != nil {
			out = []byte(err.Error())
		}
		_ = h.Output(sandbox.Stdout, append(out, '\n'))
	}
	return sandbox.ExecResult{SandboxOK: true}, nil
}

// TestShowAttachments runs a program that shows an image, a text resource
// with PII, a binary over the inline size, malformed items, and text given
// as bytes (untyped, and a Latin-1 CSV): the small ones come back inline
// (texts tokenized, bytes that are text shown as text), the large one
// saved in the tenant's workspace, the malformed ones refused with a
// ValueError.
func TestShowAttachments(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.New(workspace.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	store, err := vault.NewStore(vault.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := coreguard.New(coreguard.Options{Guards: []coreguard.Named{{Name: "pii", Plugin: emailGuard{}}}, Vaults: store})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(nullBackend{}, pool.Config{MaxTotal: 4, Template: func(string) (sandbox.CreateRequest, error) { return sandbox.CreateRequest{}, nil }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	big := strings.Repeat("B", 64)
	r := &showRunner{calls: []string{
		`{"kind":"image","mimeType":"image/png","data":"iVBORw0KGgo="}`,
		`{"kind":"resource","mimeType":"text/plain","name":"contact of jane@example.com","text":"write to jane@example.com"}`,
		`{"kind":"resource","mimeType":"application/octet-stream","name":"big.bin","data":"` + big + `"}`,
		`{"kind":"video","data":""}`,
		`{"kind":"image","mimeType":"image/png","data":"%%%"}`,
		`{"kind":"resource","mimeType":"application/octet-stream","name":"notes.log","data":"Y3VzdG9tZXIgamFuZUBleGFtcGxlLmNvbQ=="}`,
		`{"kind":"resource","mimeType":"text/csv","name":"legacy.csv","data":"Y2Fm6SBqYW5lQGV4YW1wbGUuY29t"}`,
	}}
	x := &Executor{Pool: p, Sandbox: r, Workspaces: ws, Guard: gr, Log: hclog.NewNullLogger(), MaxInlineAttachment: 40}
	res, err := x.ExecuteCode(context.Background(), CodeRequest{Tenant: "acme", Session: "s1", Code: "show()", ModelFacing: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(res.Stdout), "\n"), "\n")
	if len(lines) != 7 || lines[0] != "{}" || lines[1] != "{}" || !strings.HasPrefix(lines[2], `{"path":"/workspace/attachments/s1/`) ||
		!strings.Contains(lines[3], `unknown kind "video"`) || !strings.Contains(lines[4], "not base64") {
		t.Fatalf("replies:\n%s", res.Stdout)
	}
	a := res.Attachments
	if len(a) != 5 {
		t.Fatalf("attachments %+v", a)
	}
	if a[3].Kind != AttachResource || a[3].MIMEType != "text/plain" || a[3].Text != "customer [EMAIL_1]" || a[3].Data != nil {
		t.Errorf("untyped text %+v: want text/plain, tokenized", a[3])
	}
	if a[4].Kind != AttachResource || a[4].MIMEType != "text/csv" || a[4].Text != "caf\uFFFD [EMAIL_1]" || a[4].Data != nil {
		t.Errorf("Latin-1 CSV %+v: want text, tokenized", a[4])
	}
	if a[0].Kind != AttachImage || string(a[0].Data) != "\x89PNG\r\n\x1a\n" || a[0].Size != 8 {
		t.Errorf("image %+v", a[0])
	}
	if a[1].Kind != AttachResource || a[1].Text != "write to [EMAIL_1]" || a[1].Name != "contact of [EMAIL_1]" {
		t.Errorf("text resource %+v", a[1])
	}
	if a[2].Kind != AttachSaved || a[2].Data != nil || a[2].Size != 48 || !strings.HasSuffix(a[2].Path, ".bin") || strings.Contains(a[2].Path, "big") {
		t.Fatalf("saved %+v", a[2])
	}
	ten, err := ws.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(ten.WorkspaceDir(), a[2].Path))
	if err != nil || len(data) != 48 {
		t.Errorf("saved file: %d bytes, %v", len(data), err)
	}
	if got, err := ten.ReadAttachment(a[2].Path); err != nil || string(got) != string(data) {
		t.Errorf("ReadAttachment: %v", err)
	}
}

// TestCallResultSplitsContent checks how the face's call_tool reads a rich
// result: texts (and resource links, described) as the result, the rest as
// attachments.
func TestCallResultSplitsContent(t *testing.T) {
	raw := json.RawMessage(`{"$cexec.content":[{"type":"text","text":"here"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},` +
		`{"type":"resource","resource":{"uri":"demo://t","mimeType":"text/plain","text":"T"}},{"type":"resource_link","uri":"demo://l","name":"l","mimeType":"application/gzip"},` +
		`{"type":"resource_link","uri":"file:///y.txt","name":"y"}]}`)
	out := &CodeResult{}
	if err := callResult(out, "demo", newAttachments(nil, "s", 0), raw); err != nil {
		t.Fatal(err)
	}
	var text string
	_ = json.Unmarshal(out.Result, &text)
	// A link says what it is and how to read it: the server it came from
	// is part of that.
	want := "here\n" +
		`[resource link "l" demo://l (application/gzip); read it from a program with cexec.read_resource("demo", "demo://l")]` + "\n" +
		`[resource link "y" file:///y.txt; read it from a program with cexec.read_resource("demo", "file:///y.txt")]`
	if text != want {
		t.Errorf("result %q\nwant   %q", text, want)
	}
	if len(out.Attachments) != 2 || out.Attachments[0].Kind != AttachImage || out.Attachments[1].Text != "T" {
		t.Errorf("attachments %+v", out.Attachments)
	}
	plain := &CodeResult{}
	if err := callResult(plain, "demo", nil, json.RawMessage(`{"$cexec.value":{"$cexec.content":1}}`)); err != nil || string(plain.Result) != `{"$cexec.content":1}` {
		t.Errorf("escaped value: %s, %v", plain.Result, err)
	}
}
