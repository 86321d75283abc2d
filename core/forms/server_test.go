package forms

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

// example is the committed AcroForm made by examples/forms/generate.go.
var example = filepath.Join("..", "..", "examples", "forms", "application.pdf")

// tenantClient connects an MCP client in process to a forms server whose
// workspace is a new folder holding the example form at forms/app.pdf.
func tenantClient(t *testing.T) (*client.Client, string) {
	t.Helper()
	dir := t.TempDir()
	pdf, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "forms"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "forms", "app.pdf"), pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewInProcessClient(NewServer(func() (Workspace, error) { return Workspace{Dir: dir, UID: -1, GID: -1}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx := context.Background()
	if err := cli.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return cli, dir
}

// call calls tool and returns its structured result, or its error text.
func call(t *testing.T, cli *client.Client, tool string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cli.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		return nil, res.Content[0].(mcp.TextContent).Text
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, ""
}

func TestFields(t *testing.T) {
	cli, _ := tenantClient(t)
	out, msg := call(t, cli, "pdf_fields", map[string]any{"path": "/workspace/forms/app.pdf"})
	if msg != "" {
		t.Fatal(msg)
	}
	raw, _ := json.Marshal(out["fields"])
	var fs []Field
	if err := json.Unmarshal(raw, &fs); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(fs)
	want := `[{"name":"city","type":"text","label":"City","value":""},` +
		`{"name":"email","type":"text","label":"Email","value":""},` +
		`{"name":"name","type":"text","label":"Full name","value":""},` +
		`{"name":"newsletter","type":"checkbox","label":"Newsletter","value":false,"default":false},` +
		`{"name":"plan","type":"combobox","label":"Plan","value":"standard","default":"standard","options":["basic","standard","premium"]}]`
	if string(b) != want {
		t.Errorf("fields\n%s\nwant\n%s", b, want)
	}
}

func TestFillAndReadBack(t *testing.T) {
	cli, dir := tenantClient(t)
	vals := map[string]any{"name": "Ada Lovelace", "email": "ada@example.com", "city": "Paris", "plan": "premium", "newsletter": true}
	out, msg := call(t, cli, "fill_pdf", map[string]any{"path": "forms/app.pdf", "values": vals, "out": "out/ada.pdf"})
	if msg != "" {
		t.Fatal(msg)
	}
	if !reflect.DeepEqual(out["filled"], []any{"city", "email", "name", "newsletter", "plan"}) {
		t.Errorf("filled %v", out["filled"])
	}
	back, msg := call(t, cli, "read_pdf", map[string]any{"path": "out/ada.pdf"})
	if msg != "" {
		t.Fatal(msg)
	}
	if !reflect.DeepEqual(back["values"], vals) {
		t.Errorf("read back %v, want %v", back["values"], vals)
	}
	// The template is untouched and no temporary file is left.
	orig, _ := call(t, cli, "read_pdf", map[string]any{"path": "forms/app.pdf"})
	if orig["values"].(map[string]any)["name"] != "" {
		t.Errorf("template changed: %v", orig)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "out")); len(ents) != 1 {
		t.Errorf("out folder holds %d entries", len(ents))
	}
}

func TestFillErrors(t *testing.T) {
	cli, _ := tenantClient(t)
	tests := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"unknown field", map[string]any{"phone": "1"}, `values.phone: the form has no field "phone"; its fields are city, email, name, newsletter, plan`},
		{"option", map[string]any{"plan": "gold"}, `values.plan: "gold" is not one of the options basic, standard, premium`},
		{"checkbox", map[string]any{"newsletter": "yes"}, "values.newsletter: a checkbox takes true or false"},
		{"text type", map[string]any{"name": true}, "values.name: a text field takes a string"},
	}
	// Values a field already holds fill nothing new: the copy is the original.
	if out, msg := call(t, cli, "fill_pdf", map[string]any{"path": "forms/app.pdf", "values": map[string]any{"plan": "standard"}, "out": "same.pdf"}); msg != "" || out["out"] != "same.pdf" {
		t.Errorf("fill with the current value: %v %s", out, msg)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, msg := call(t, cli, "fill_pdf", map[string]any{"path": "forms/app.pdf", "values": tt.vals, "out": "x.pdf"})
			if msg != tt.want {
				t.Errorf("error %q, want %q", msg, tt.want)
			}
		})
	}
}

// TestPathsStayInWorkspace: no path, absolute, relative or through a
// symlink planted in the workspace, reaches a file outside it, such as
// another tenant's form.
func TestPathsStayInWorkspace(t *testing.T) {
	cli, dir := tenantClient(t)
	_, other := tenantClient(t)
	otherPDF := filepath.Join(other, "forms", "app.pdf")
	if err := os.Symlink(filepath.Join(other, "forms"), filepath.Join(dir, "theirs")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, otherPDF)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_pdf", map[string]any{"path": otherPDF}, "is outside the workspace"},
		{"read_pdf", map[string]any{"path": rel}, "is outside the workspace"},
		{"read_pdf", map[string]any{"path": "/workspace/../" + rel}, "is outside the workspace"},
		{"pdf_fields", map[string]any{"path": "theirs/app.pdf"}, "leads outside the workspace"},
		{"fill_pdf", map[string]any{"path": "forms/app.pdf", "values": map[string]any{"name": "x"}, "out": "theirs/stolen.pdf"}, "leads outside the workspace"},
		{"fill_pdf", map[string]any{"path": "forms/app.pdf", "values": map[string]any{"name": "x"}, "out": "/tmp/x.pdf"}, "is outside the workspace"},
		{"read_pdf", map[string]any{"path": ""}, "path is empty"},
		{"read_pdf", map[string]any{"path": "/workspace"}, "is outside the workspace"},
	}
	for _, tt := range tests {
		if _, msg := call(t, cli, tt.tool, tt.args); !strings.Contains(msg, tt.want) {
			t.Errorf("%s %v: error %q, want it to contain %q", tt.tool, tt.args, msg, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "forms", "stolen.pdf")); !os.IsNotExist(err) {
		t.Errorf("a file was written in the other tenant's workspace: %v", err)
	}
}

func TestNotAForm(t *testing.T) {
	cli, dir := tenantClient(t)
	if err := os.WriteFile(filepath.Join(dir, "note.pdf"), []byte("not a pdf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, msg := call(t, cli, "pdf_fields", map[string]any{"path": "note.pdf"}); msg != "path: note.pdf is not a PDF (a PDF starts with %PDF-)" {
		t.Errorf("error %q", msg)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.pdf"), formless(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"pdf_fields", "read_pdf"} {
		if _, msg := call(t, cli, tool, map[string]any{"path": "plain.pdf"}); msg != "path: plain.pdf has no form fields (the forms tools fill AcroForm fields)" {
			t.Errorf("%s of a PDF without a form: error %q", tool, msg)
		}
	}
	if _, msg := call(t, cli, "fill_pdf", map[string]any{"path": "plain.pdf", "values": map[string]any{"name": "Ada"}, "out": "x.pdf"}); msg != "path: plain.pdf has no form fields (the forms tools fill AcroForm fields)" {
		t.Errorf("fill_pdf of a PDF without a form: error %q", msg)
	}
	if _, msg := call(t, cli, "read_pdf", map[string]any{"path": "missing.pdf"}); !strings.Contains(msg, "no such file") {
		t.Errorf("error %q", msg)
	}
	// The workspace's place on the host is cexecd's, not the caller's.
	if err := os.Mkdir(filepath.Join(dir, "folder.pdf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, msg := call(t, cli, "pdf_fields", map[string]any{"path": "folder.pdf"}); msg != "path: folder.pdf is a folder, not a PDF" {
		t.Errorf("error %q", msg)
	}
	// A named pipe planted by a program would block the read forever.
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.pdf"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		_, msg := call(t, cli, "pdf_fields", map[string]any{"path": "pipe.pdf"})
		done <- msg
	}()
	select {
	case msg := <-done:
		if msg != "path: pipe.pdf is not a regular file" {
			t.Errorf("error %q", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pdf_fields on a named pipe hangs")
	}
}

// TestConcurrentFillsSameOut fills one out from several calls at once (two
// workflow runs, or a run and a program): each call succeeds and the file
// left is one of the filled copies whole, never a mix of two.
func TestConcurrentFillsSameOut(t *testing.T) {
	cli, dir := tenantClient(t)
	names := []string{"ada", "grace lovelace-hopper the first of her name", "b", "charles babbage"}
	var wg sync.WaitGroup
	msgs := make([]string, len(names)*4)
	for i := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, msgs[i] = call(t, cli, "fill_pdf", map[string]any{"path": "forms/app.pdf", "values": map[string]any{"name": names[i%len(names)]}, "out": "out/filled.pdf"})
		}()
	}
	wg.Wait()
	for _, m := range msgs {
		if m != "" {
			t.Errorf("fill: %s", m)
		}
	}
	out, msg := call(t, cli, "read_pdf", map[string]any{"path": "out/filled.pdf"})
	if msg != "" {
		t.Fatalf("read back: %s", msg)
	}
	got, _ := out["values"].(map[string]any)["name"].(string)
	if !slices.Contains(names, got) {
		t.Errorf("name read back %q, want one of %q", got, names)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "out", ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestEncryptedForm: a form that needs a password to open is refused in
// words the caller can act on; the tools take no password.
func TestEncryptedForm(t *testing.T) {
	cli, dir := tenantClient(t)
	conf := model.NewAESConfiguration("secret", "owner", 256)
	if err := api.EncryptFile(filepath.Join(dir, "forms", "app.pdf"), filepath.Join(dir, "locked.pdf"), conf); err != nil {
		t.Fatal(err)
	}
	want := "path: locked.pdf is encrypted with a password, which the forms tools cannot open; give an unencrypted copy"
	for _, tool := range []string{"pdf_fields", "read_pdf", "fill_pdf"} {
		_, msg := call(t, cli, tool, map[string]any{"path": "locked.pdf", "values": map[string]any{"name": "x"}, "out": "x.pdf"})
		if msg != want {
			t.Errorf("%s: error %q, want %q", tool, msg, want)
		}
	}
}

// formless is a valid one-page PDF without a form.
func formless() []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	var offsets []int
	for i, o := range objs {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// TestPanicIsAnError: the forms server runs in cexecd's own process, on
// PDFs tenants write; a panic in a handler (a parser bug on a crafted
// file; here the workspace lookup) fails that call and leaves cexecd
// running for every other tenant.
func TestPanicIsAnError(t *testing.T) {
	cli, err := client.NewInProcessClient(NewServer(func() (Workspace, error) { panic("crafted input") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx := context.Background()
	if err := cli.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err := cli.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "pdf_fields", Arguments: map[string]any{"path": "x.pdf"}}})
	if err == nil && !res.IsError {
		t.Fatalf("a panicking call succeeded: %+v", res)
	}
}
