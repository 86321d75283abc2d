package mcpface

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// withLocalTools adds a local tools package to the test catalog, as the
// shipped servers/textutils is: two functions in its __init__.py.
func withLocalTools(_ *Options, w *world) {
	for _, name := range []string{"word_count", "csv_summary"} {
		w.catalog.tools = append(w.catalog.tools, Tool{Server: "textutils", Name: name, Import: "from servers.textutils import " + name,
			Signature: name + "(text: str) -> dict", Path: "servers/textutils/__init__.py", Local: true})
		w.catalog.src["textutils/"+name] = "def " + name + "(text: str) -> dict:\n    ...\n"
	}
	w.catalog.servers = append(w.catalog.servers, Server{Name: "textutils", Package: "textutils", State: "local", Tools: 2})
	w.catalog.files["servers/textutils/__init__.py"] = "def word_count(text: str) -> dict:\n    ...\n\n\ndef csv_summary(text: str) -> dict:\n    ...\n"
}

// TestResourcesListedOnce: a module that defines several local tools is
// one resource.
func TestResourcesListedOnce(t *testing.T) {
	w := newWorld(t, withLocalTools)
	c := connect(t, w.url+"/mcp")
	list, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range list.Resources {
		seen[r.URI]++
		if r.URI == "cexec://servers/textutils/__init__.py" && r.Name != "textutils/__init__.py" {
			t.Errorf("local module named %q, want its file", r.Name)
		}
	}
	for uri, n := range seen {
		if n > 1 {
			t.Errorf("%s listed %d times", uri, n)
		}
	}
	if seen["cexec://servers/textutils/__init__.py"] != 1 {
		t.Errorf("local module not listed: %v", seen)
	}
}

// TestLocalToolResources: a local tools module is read whole, as sandboxed
// code imports it; a local tool also has the URI of the stub scheme,
// servers/<package>/<function>.py, which shows its function.
func TestLocalToolResources(t *testing.T) {
	w := newWorld(t, withLocalTools)
	c := connect(t, w.url+"/mcp")
	tests := []struct {
		uri  string
		want []string
		err  string
	}{
		{uri: "cexec://servers/textutils/__init__.py", want: []string{"def word_count(", "def csv_summary("}},
		{uri: "cexec://servers/textutils/word_count.py", want: []string{"def word_count("}},
		{uri: "cexec://servers/textutils/csv_summary.py", want: []string{"def csv_summary("}},
		{uri: "cexec://servers/textutils/nope.py", err: "cexec://servers/textutils/nope.py (no such stub or local tools module"},
	}
	for _, tt := range tests {
		res, err := c.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: tt.uri}})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("read %s: %v, want %q", tt.uri, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("read %s: %v", tt.uri, err)
			continue
		}
		tc, _ := res.Contents[0].(mcp.TextResourceContents)
		for _, want := range tt.want {
			if !strings.Contains(tc.Text, want) || tc.URI != tt.uri {
				t.Errorf("read %s: %+v, want %q", tt.uri, res.Contents, want)
			}
		}
		if tt.uri == "cexec://servers/textutils/word_count.py" && strings.Contains(tc.Text, "csv_summary") {
			t.Errorf("read %s shows more than its function: %q", tt.uri, tc.Text)
		}
	}
}

// TestResourceNotFound: a URI that names nothing is -32002 (resource not
// found, MCP's resources/read), with what to look at instead; a resource
// that exists but cannot be read stays -32603 (internal error).
func TestResourceNotFound(t *testing.T) {
	store := &tenantFiles{files: map[string]map[string][]byte{}}
	w := newWorld(t, withLocalTools, func(o *Options, _ *world) { o.Attachments = store })
	w.skills.broken = map[string]error{"broken": errors.New("SKILL.md line 2: cannot parse")}
	c := connect(t, w.url+"/mcp")
	tests := []struct {
		uri  string
		code error
		want string
	}{
		{"cexec://servers/everything/nope.py", mcp.ErrResourceNotFound, "cexec://servers/everything/nope.py (no such stub or local tools module; resources/list"},
		{"cexec://servers/textutils/nope.py", mcp.ErrResourceNotFound, "(no such stub or local tools module"},
		{"cexec://skills/nope", mcp.ErrResourceNotFound, "cexec://skills/nope (no such skill; skills() lists"},
		{"cexec://workspace/attachments/s/missing.png", mcp.ErrResourceNotFound, "(no saved attachment there)"},
		{"cexec://nowhere", mcp.ErrResourceNotFound, "cexec://nowhere"},
		{"cexec://skills/broken", mcp.ErrInternalError, "SKILL.md line 2: cannot parse"},
	}
	for _, tt := range tests {
		_, err := c.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: tt.uri}})
		if !errors.Is(err, tt.code) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("read %s: %v, want %v with %q", tt.uri, err, tt.code, tt.want)
		}
	}
}
