package config

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/cexec/cexec/pluginapi"
)

// maxSchemaDepth bounds nesting in a plugin's schema: the schema comes from
// a plugin process and is not trusted to be well-formed.
const maxSchemaDepth = 8

// DecodePluginBody decodes the plugin-specific part of p's block against the
// schema the plugin declares and returns it as the JSON object Configure
// takes. Omitted optional attributes and blocks are left out of the object,
// so a plugin's own defaults survive. Diagnostics point at cexec.hcl.
func DecodePluginBody(p *Plugin, s pluginapi.ConfigSchema) (json.RawMessage, hcl.Diagnostics) {
	out, _, diags := decodePluginBody(p, s)
	return out, diags
}

// decodePluginBody also returns the paths (relative to the plugin's config
// object) that must be masked: the schema's Sensitive attributes and every
// value that came from env().
func decodePluginBody(p *Plugin, s pluginapi.ConfigSchema) (json.RawMessage, [][]string, hcl.Diagnostics) {
	who := fmt.Sprintf("plugin %q %q", p.Kind, p.Name)
	spec, diags := objectSpec(s, who, p.DeclRange, 0)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	ctx := p.ctx
	if ctx == nil {
		ctx = evalContext(os.LookupEnv, nil)
	}
	body := p.Body
	if body == nil {
		body = hcl.EmptyBody()
	}
	val, diags := hcldec.Decode(body, spec, ctx)
	for _, d := range diags {
		switch d.Summary {
		case "Unsupported argument", "Unsupported block type":
			d.Summary += " in " + who
		}
		// The diagnostic writer would print the evaluation context, which
		// may hold env() results.
		d.Expression, d.EvalContext = nil, nil
	}
	if diags.HasErrors() {
		return nil, nil, diags
	}
	val, pvms := val.UnmarkDeepWithPaths()
	var sensitive [][]string
	for _, pvm := range pvms {
		if _, ok := pvm.Marks[sensitiveMark]; ok {
			sensitive = append(sensitive, joinPath(nil, pvm.Path))
		}
	}
	obj, err := toJSON(val, s, nil, &sensitive)
	if err != nil {
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot encode plugin config",
			Detail:   fmt.Sprintf("%s: %s.", who, err),
			Subject:  p.DeclRange.Ptr(),
		}}
	}
	return obj, sensitive, nil
}

// objectSpec turns a plugin's ConfigSchema into an hcldec spec, checking the
// schema on the way.
func objectSpec(s pluginapi.ConfigSchema, who string, rng hcl.Range, depth int) (hcldec.ObjectSpec, hcl.Diagnostics) {
	bad := func(detail string, args ...any) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid plugin config schema",
			Detail:   who + " declares an invalid config schema: " + fmt.Sprintf(detail, args...) + " This is a bug in the plugin.",
			Subject:  rng.Ptr(),
		}}
	}
	if depth > maxSchemaDepth {
		return nil, bad("blocks nest deeper than %d levels.", maxSchemaDepth)
	}
	spec := hcldec.ObjectSpec{}
	for _, a := range s.Attributes {
		if !hclsyntax.ValidIdentifier(a.Name) {
			return nil, bad("attribute name %q is not a valid identifier.", a.Name)
		}
		if _, dup := spec[a.Name]; dup {
			return nil, bad("%q is declared twice.", a.Name)
		}
		ty, err := parseType(a.Type)
		if err != nil {
			return nil, bad("attribute %q has type %q: %s.", a.Name, a.Type, err)
		}
		spec[a.Name] = &hcldec.AttrSpec{Name: a.Name, Type: ty, Required: a.Required}
	}
	for _, b := range s.Blocks {
		if !hclsyntax.ValidIdentifier(b.TypeName) {
			return nil, bad("block type %q is not a valid identifier.", b.TypeName)
		}
		if _, dup := spec[b.TypeName]; dup {
			return nil, bad("%q is declared twice.", b.TypeName)
		}
		nested, diags := objectSpec(b.Body, who, rng, depth+1)
		if diags.HasErrors() {
			return nil, diags
		}
		if b.List {
			// A tuple, not a list: blocks whose `any` attributes hold
			// values of different types are still valid JSON arrays.
			spec[b.TypeName] = &hcldec.BlockTupleSpec{TypeName: b.TypeName, Nested: nested}
		} else {
			spec[b.TypeName] = &hcldec.BlockSpec{TypeName: b.TypeName, Nested: nested}
		}
	}
	return spec, nil
}

// parseType parses an HCL type expression such as "list(string)".
func parseType(s string) (cty.Type, error) {
	expr, diags := hclsyntax.ParseExpression([]byte(s), "type", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("%s", diags[0].Summary)
	}
	ty, diags := typeexpr.TypeConstraint(expr)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("%s", diags[0].Detail)
	}
	return ty, nil
}

// toJSON encodes a decoded body as a JSON object, leaving out null
// attributes and absent blocks, and adds the schema's Sensitive attributes
// to sensitive.
func toJSON(val cty.Value, s pluginapi.ConfigSchema, at []string, sensitive *[][]string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	for _, a := range s.Attributes {
		v := val.GetAttr(a.Name)
		if v.IsNull() {
			continue
		}
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", a.Name, err)
		}
		obj[a.Name] = b
		if a.Sensitive {
			*sensitive = append(*sensitive, append(append([]string(nil), at...), a.Name))
		}
	}
	for _, b := range s.Blocks {
		v := val.GetAttr(b.TypeName)
		if v.IsNull() {
			continue
		}
		p := append(append([]string(nil), at...), b.TypeName)
		if !b.List {
			enc, err := toJSON(v, b.Body, p, sensitive)
			if err != nil {
				return nil, err
			}
			obj[b.TypeName] = enc
			continue
		}
		elems := v.AsValueSlice()
		if len(elems) == 0 {
			continue
		}
		list := make([]json.RawMessage, len(elems))
		for i, e := range elems {
			enc, err := toJSON(e, b.Body, append(p, strconv.Itoa(i)), sensitive)
			if err != nil {
				return nil, err
			}
			list[i] = enc
		}
		enc, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		obj[b.TypeName] = enc
	}
	return json.Marshal(obj)
}

// AttributeRange maps a dotted attribute path, as plugins report it in
// Diagnostic.Attribute ("model", "embeddings.model", "rules.1.pattern" or
// "rules[1].pattern"), to its range in cexec.hcl. It falls back to the
// nearest enclosing block found, and finally to the plugin block itself.
func (p *Plugin) AttributeRange(attrPath string) hcl.Range {
	parts := splitAttrPath(attrPath)
	if len(parts) == 0 {
		return p.DeclRange
	}
	if r, ok := p.attrRanges[parts[0]]; ok {
		return r
	}
	if p.Body == nil {
		return p.DeclRange
	}
	return rangeIn(p.Body, parts, p.DeclRange)
}

func splitAttrPath(s string) []string {
	s = strings.NewReplacer("[", ".", "]", "").Replace(s)
	var out []string
	for _, part := range strings.Split(s, ".") {
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// rangeIn walks body along parts: an attribute ends the walk, a block type
// optionally followed by an index descends into that block.
func rangeIn(body hcl.Body, parts []string, fallback hcl.Range) hcl.Range {
	name := parts[0]
	content, _, _ := body.PartialContent(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: name}},
	})
	if content != nil {
		if a, ok := content.Attributes[name]; ok {
			return a.Range
		}
	}
	content, _, _ = body.PartialContent(&hcl.BodySchema{
		Blocks: []hcl.BlockHeaderSchema{{Type: name}},
	})
	if content == nil || len(content.Blocks) == 0 {
		return fallback
	}
	rest := parts[1:]
	idx := 0
	if len(rest) > 0 {
		if n, err := strconv.Atoi(rest[0]); err == nil {
			idx, rest = n, rest[1:]
		}
	}
	if idx < 0 || idx >= len(content.Blocks) {
		return content.Blocks[0].DefRange
	}
	blk := content.Blocks[idx]
	if len(rest) == 0 {
		return blk.DefRange
	}
	return rangeIn(blk.Body, rest, blk.DefRange)
}
