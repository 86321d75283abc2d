package plugintest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/cexec/cexec/pluginapi"
)

// reservedAttributes are the attributes cexec.hcl's plugin block uses for
// itself; a plugin's schema must not declare them at the top level.
var reservedAttributes = []string{"command", "args", "sha256", "required", "timeout", "env"}

// CheckInfo asserts that b's Info is something cexecd will accept: a name, a
// version, the expected kind, "v1" among the API versions, and a config
// schema whose attribute and block names are valid, unique HCL identifiers
// that do not clash with cexec's own plugin attributes, and whose attribute
// types are valid HCL type expressions. It returns the Info for further
// checks.
func CheckInfo(t testing.TB, b pluginapi.Base, kind pluginapi.Kind) pluginapi.Info {
	t.Helper()
	info, err := b.Info(t.Context())
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	for _, p := range InfoProblems(info, kind) {
		t.Errorf("Info: %s", p)
	}
	return info
}

// InfoProblems lists what is wrong with info for a plugin of the given kind,
// as CheckInfo reports it; nil means nothing is.
func InfoProblems(info pluginapi.Info, kind pluginapi.Kind) []string {
	var probs []string
	if info.Name == "" {
		probs = append(probs, "name is empty")
	}
	if info.Version == "" {
		probs = append(probs, "version is empty")
	}
	if info.Kind != kind {
		probs = append(probs, fmt.Sprintf("kind is %q, want %q", info.Kind, kind))
	}
	if !slices.Contains(info.APIVersions, "v1") {
		probs = append(probs, "api versions do not include \"v1\"")
	}
	return append(probs, schemaProblems(info.ConfigSchema, "", true)...)
}

func schemaProblems(s pluginapi.ConfigSchema, prefix string, top bool) []string {
	var probs []string
	seen := map[string]bool{}
	name := func(n, what string) bool {
		path := prefix + n
		switch {
		case !hclsyntax.ValidIdentifier(n):
			probs = append(probs, fmt.Sprintf("%s %q is not a valid HCL identifier", what, path))
		case seen[n]:
			probs = append(probs, fmt.Sprintf("%s %q is declared twice", what, path))
		case top && slices.Contains(reservedAttributes, n):
			probs = append(probs, fmt.Sprintf("%s %q clashes with cexec's own plugin attribute", what, path))
		default:
			seen[n] = true
			return true
		}
		return false
	}
	for _, a := range s.Attributes {
		if !name(a.Name, "attribute") {
			continue
		}
		if err := checkType(a.Type); err != "" {
			probs = append(probs, fmt.Sprintf("attribute %q: type %q: %s", prefix+a.Name, a.Type, err))
		}
	}
	for _, b := range s.Blocks {
		if name(b.TypeName, "block") {
			probs = append(probs, schemaProblems(b.Body, prefix+b.TypeName+".", false)...)
		}
	}
	return probs
}

// checkType parses an attribute type the way the host does.
func checkType(typ string) string {
	expr, diags := hclsyntax.ParseExpression([]byte(typ), "type", hcl.InitialPos)
	if diags.HasErrors() {
		return diags.Error()
	}
	if _, diags := typeexpr.TypeConstraint(expr); diags.HasErrors() {
		return diags.Error()
	}
	return ""
}
