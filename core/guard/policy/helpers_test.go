package policy_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func itoa(n int) string { return strconv.Itoa(n) }

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parseBody parses a config text with one tenant block and returns the
// body of its policy block, as core/config would hand it over.
func parseBody(t *testing.T, src string) hcl.Body {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "inline.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var root struct {
		Tenants []struct {
			ID     string `hcl:"id,label"`
			Policy *struct {
				Body hcl.Body `hcl:",remain"`
			} `hcl:"policy,block"`
		} `hcl:"tenant,block"`
	}
	if diags := gohcl.DecodeBody(f.Body, nil, &root); diags.HasErrors() {
		t.Fatal(diags)
	}
	return root.Tenants[0].Policy.Body
}
