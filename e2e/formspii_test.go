package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

// TestFormsPIITokens: with the PII guard on, an agent reads a customer
// record through the filesystem server and sees its email and phone only as
// tokens; the code it writes fills the PDF form with those tokens, and the
// built-in forms server receives (and writes) the real values, restored in
// fill_pdf's arguments; reading the form back shows the agent tokens again.
func TestFormsPIITokens(t *testing.T) {
	e := newGuardEnv(t, "cexec-plugin-guard-pii", "mcp_server \"forms\" {\n  transport = \"builtin\"\n}\n")
	startDaemon(t, e.setup)
	blank, err := os.ReadFile(filepath.Join("..", "examples", "forms", "application.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpSession(t, e.setup, "default")
	code := fmt.Sprintf(`import base64, os, cexec
from servers.filesystem import read_text_file
from servers.forms import fill_pdf, read_pdf
os.makedirs("/workspace/forms", exist_ok=True)
open("/workspace/forms/application.pdf", "wb").write(base64.b64decode(%q))
text = read_text_file(path=%q)["content"]
rec = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
fill_pdf(path="forms/application.pdf", out="forms/roe.pdf",
         values={"name": rec["Name"], "email": rec["Email"], "city": rec["Phone"]})
cexec.result({"seen": rec["Email"], "back": read_pdf(path="forms/roe.pdf")["values"]})
`, base64.StdEncoding.EncodeToString(blank), filepath.Join(e.files, "customer.txt"))
	r := executeCode(t, c, code, "")
	if r.isError || r.out.Error != nil {
		t.Fatalf("filling the form failed:\n%s", r.text)
	}
	assertNoPII(t, "the model-facing reply", r.raw)
	var res struct {
		Seen string         `json:"seen"`
		Back map[string]any `json:"back"`
	}
	if err := json.Unmarshal(r.out.Result, &res); err != nil {
		t.Fatalf("result %s: %v", r.out.Result, err)
	}
	if m := tokenRE.FindStringSubmatch(res.Seen); m == nil || m[1] != "EMAIL" || res.Back["email"] != res.Seen || res.Back["name"] != "J. Roe" {
		t.Errorf("the model saw %s and read back %v; want an EMAIL token both times", res.Seen, res.Back)
	}

	// The PDF in the workspace holds the real values.
	pdf, err := os.ReadFile(filepath.Join(e.dir, "data", "tenants", "default", "workspace", "forms", "roe.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	model.ConfigPath = "disable"
	g, err := api.ExportForm(bytes.NewReader(pdf), "roe.pdf", model.NewDefaultConfiguration())
	if err != nil || len(g.Forms) != 1 {
		t.Fatalf("read the filled PDF: %v", err)
	}
	got := map[string]string{}
	for _, f := range g.Forms[0].TextFields {
		got[f.Name] = f.Value
	}
	if got["email"] != "jane.roe@example.com" || got["city"] != "+1 650-253-0000" || got["name"] != "J. Roe" {
		t.Errorf("the PDF holds %v; want the real email and phone", got)
	}
}
