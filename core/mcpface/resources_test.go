package mcpface

import (
	"context"
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
