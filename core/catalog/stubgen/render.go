package stubgen

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxLine is the line length past which a signature gets one parameter per line.
const maxLine = 88

// param is one keyword-only parameter of a stub function.
type param struct {
	orig     string // MCP argument name
	name     string // Python parameter name
	t        *pyType
	required bool
	def      string // Python default expression, "" when required
	doc      string
	schema   *jv
}

// toolModel is a tool's function before rendering.
type toolModel struct {
	fn        string
	mod       *module
	params    []param // required first
	extra     *pyType // type of **kwargs when the schema admits further arguments, else nil
	extraName string
	ret       *pyType
	retDoc    string
}

// buildTool maps a tool's schemas to its function: parameters, their names and defaults,
// and the return type.
func buildTool(fn string, tool Tool) *toolModel {
	prefix := camel(fn)
	if prefix == "" {
		prefix = "Tool"
	}
	m := newModule(fn)

	// Input schema → parameters.
	var params []param
	var extra *pyType // type of **kwargs when the schema admits arbitrary further arguments
	in := &typer{mod: m, base: prefix, rootName: prefix + "Params", what: "input"}
	root, err := parseSchema(tool.InputSchema)
	if err != nil {
		m.warn("input schema: %v; the function passes its keyword arguments as given", err)
		extra = anyType
	} else {
		in.root = root
		ps := in.paramsObject(root)
		for i, key := range ps.props.keys {
			s := ps.props.vals[i]
			doc, _ := s.str("description")
			params = append(params, param{
				orig:     key,
				t:        in.typeOf(s, prefix+camel(key), 1, nil),
				required: ps.required[key],
				doc:      joinLines(normalizeText(doc), valueDocs(s)),
				schema:   s,
			})
		}
		if ps.extra != nil {
			extra = in.typeOf(ps.extra, prefix+"Extra", 1, nil)
		}
	}

	// Output schema → return type.
	ret := anyType
	retDoc := ""
	if len(tool.OutputSchema) > 0 && string(tool.OutputSchema) != "null" {
		oroot, err := parseJSON(tool.OutputSchema)
		if err != nil {
			m.warn("output schema: %v; the return type is Any", err)
		} else {
			out := &typer{mod: m, root: oroot, base: prefix + "Result", rootName: prefix + "Result", what: "output"}
			if plainObject(oroot) {
				ret = refTo(out.typedDict(oroot, prefix+"Result", 0))
			} else {
				ret = out.typeOf(oroot, prefix+"Result", 0, nil)
			}
			retDoc, _ = oroot.str("description")
		}
	}

	// Names: parameters must not shadow what the body refers to.
	reserved := []map[string]bool{bodyNames, namesIn(ret)}
	pn := newNamer(false, reserved...)
	origs := make([]string, len(params))
	for i, p := range params {
		origs[i] = p.orig
	}
	for i, name := range assignNames(pn, origs, "arg") {
		params[i].name = name
	}
	extraName := ""
	if extra != nil {
		extraName = pn.claim("extra")
	}

	// Defaults: required parameters first, schema order otherwise.
	slices.SortStableFunc(params, func(a, b param) int {
		switch {
		case a.required == b.required:
			return 0
		case a.required:
			return -1
		}
		return 1
	})
	for i := range params {
		p := &params[i]
		if p.required {
			continue
		}
		dv := p.schema.get("default")
		if lit, ok := pyDefault(dv); ok && admits(p.t, dv) {
			p.def = lit
			continue
		}
		p.t = union(p.t, noneType)
		p.def = "None"
		if dv != nil && dv.kind != jNull {
			p.doc = joinSentence(p.doc, "Defaults to "+truncate(dv.compact(), 200)+".")
		}
	}

	return &toolModel{fn: fn, mod: m, params: params, extra: extra, extraName: extraName, ret: ret, retDoc: retDoc}
}

// renderTool renders the module of one tool.
func renderTool(server, pkg string, tm *toolModel, tool Tool) (Stub, []byte) {
	fn, params, extra, extraName := tm.fn, tm.params, tm.extra, tm.extraName
	r := newRenderer(tm.mod)
	var defs strings.Builder
	var types []*pyType
	for _, p := range params {
		types = append(types, p.t)
	}
	if extra != nil {
		types = append(types, extra)
	}
	r.emitAll(&defs, append(types, tm.ret)...)

	parts, retAnn := signatureParts(r, tm)
	sig := fn + "(" + strings.Join(parts, ", ") + ") -> " + retAnn

	var b strings.Builder
	if line := "def " + sig + ":"; utf8.RuneCountInString(line) <= maxLine {
		b.WriteString(line + "\n")
	} else {
		b.WriteString("def " + fn + "(\n")
		for _, p := range parts {
			b.WriteString("    " + p + ",\n")
		}
		b.WriteString(") -> " + retAnn + ":\n")
	}
	docstring(&b, "    ", toolDoc(server, tool, params, extraName, tm.retDoc))

	writeCall(&b, r, server, tool.Name, tm, retAnn)

	var src strings.Builder
	src.WriteString(Marker + "\n\n")
	if imports := r.typingImports(); len(imports) > 0 {
		src.WriteString("from typing import " + strings.Join(imports, ", ") + "\n\n")
	}
	src.WriteString("from cexec import call_tool\n\n")
	src.WriteString("__all__ = [" + pyString(fn) + "]\n\n\n")
	src.WriteString(defs.String())
	src.WriteString(b.String())

	stub := Stub{
		Tool:      tool.Name,
		Function:  fn,
		Module:    "servers." + pkg + "." + fn,
		Path:      "servers/" + pkg + "/" + fn + ".py",
		Signature: sig,
		Warnings:  tm.mod.warnings,
	}
	return stub, []byte(src.String())
}

// signatureParts renders the parameters of a tool's function (keyword-only,
// then **extra) and its return annotation.
func signatureParts(r *renderer, tm *toolModel) (parts []string, retAnn string) {
	for _, p := range tm.params {
		s := p.name + ": " + r.annotation(p.t)
		if p.def != "" {
			s += " = " + p.def
		}
		parts = append(parts, s)
	}
	if len(parts) > 0 {
		parts = append([]string{"*"}, parts...)
	}
	if tm.extra != nil {
		parts = append(parts, "**"+tm.extraName+": "+r.annotation(tm.extra))
	}
	retAnn = r.annotation(tm.ret)
	return parts, retAnn
}

// writeCall writes the function's body: call_tool with the required
// arguments always and the optional ones when they differ from their
// default, cast to the return type when it is known.
func writeCall(b *strings.Builder, r *renderer, server, tool string, tm *toolModel, retAnn string) {
	call := "call_tool(" + pyString(server) + ", " + pyString(tool) + ", "
	var required []string
	if tm.extra != nil {
		required = append(required, "**"+tm.extraName)
	}
	optional := false
	for _, p := range tm.params {
		if p.required {
			required = append(required, pyString(p.orig)+": "+p.name)
		} else {
			optional = true
		}
	}
	dict := "{" + strings.Join(required, ", ") + "}"
	if optional || tm.extra != nil {
		b.WriteString("    " + localArgs + ": dict[str, Any] = " + dict + "\n")
		for _, p := range tm.params {
			if p.required {
				continue
			}
			cond := p.name + " is not None"
			if p.def != "None" {
				cond = p.name + " != " + p.def
			}
			b.WriteString("    if " + cond + ":\n")
			b.WriteString("        " + localArgs + "[" + pyString(p.orig) + "] = " + p.name + "\n")
		}
		call += localArgs + ")"
		r.use("Any")
	} else {
		call += dict + ")"
	}
	if tm.ret.kind == tAny {
		b.WriteString("    return " + call + "\n")
	} else {
		r.use("cast")
		b.WriteString("    return cast(" + retAnn + ", " + call + ")\n")
	}

}

// parseSchema parses an input schema; an absent one means "no arguments".
func parseSchema(raw []byte) (*jv, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return &jv{kind: jObject}, nil
	}
	return parseJSON(raw)
}

// paramsSet is the flattened root object of an input schema.
type paramsSet struct {
	props    *jv // object: argument name → schema
	required map[string]bool
	extra    *jv // schema of further arguments, nil when there are none
}

// paramsObject flattens the root of an input schema into parameters: the root's properties
// (through a root $ref), those of allOf members (required when any member requires them) and
// of anyOf/oneOf members (required when every member does).
func (t *typer) paramsObject(root *jv) paramsSet {
	ps := paramsSet{props: &jv{kind: jObject}, required: map[string]bool{}}
	s := t.follow(root)
	if s == nil || s.kind != jObject {
		t.mod.warn("input schema is not an object schema; the function takes no arguments")
		return ps
	}
	add := func(o *jv) {
		if p := o.get("properties"); p != nil && p.kind == jObject {
			for i, k := range p.keys {
				if ps.props.index(k) < 0 {
					ps.props.keys = append(ps.props.keys, k)
					ps.props.vals = append(ps.props.vals, p.vals[i])
				}
			}
		}
	}
	requiredOf := func(o *jv) map[string]bool {
		r := map[string]bool{}
		for _, e := range o.list("required") {
			if e.kind == jString {
				r[e.s] = true
			}
		}
		return r
	}
	add(s)
	for k := range requiredOf(s) {
		ps.required[k] = true
	}
	for _, a := range s.list("allOf") {
		if o := t.follow(a); o != nil {
			add(o)
			for k := range requiredOf(o) {
				ps.required[k] = true
			}
		}
	}
	alts := append(append([]*jv(nil), s.list("anyOf")...), s.list("oneOf")...)
	var common map[string]bool
	for i, a := range alts {
		o := t.follow(a)
		if o == nil {
			common = map[string]bool{}
			continue
		}
		add(o)
		r := requiredOf(o)
		if i == 0 {
			common = r
			continue
		}
		for k := range common {
			if !r[k] {
				delete(common, k)
			}
		}
	}
	for k := range common {
		ps.required[k] = true
	}
	for k := range ps.required {
		if ps.props.index(k) < 0 {
			delete(ps.required, k) // required but undeclared: nothing to name it by
		}
	}
	if ap := s.get("additionalProperties"); ap != nil && !isFalse(ap) {
		ps.extra = ap
	}
	return ps
}

// pyDefault renders a scalar JSON default as a Python expression; null, arrays and objects
// have no safe literal (mutable defaults) and are reported as not renderable.
func pyDefault(v *jv) (string, bool) {
	if v == nil {
		return "", false
	}
	switch v.kind {
	case jString, jBool:
		return pyLiteral(v)
	case jNumber:
		if v.isInt() {
			return pyLiteral(v)
		}
		return v.s, true
	}
	return "", false
}

// toolDoc assembles the function docstring: description, annotation hints, arguments.
func toolDoc(server string, tool Tool, params []param, extraName, retDoc string) string {
	text := normalizeText(tool.Description)
	if text == "" {
		text = normalizeText(firstNonBlank(tool.Title, tool.Annotations.Title))
	}
	if text == "" {
		text = fmt.Sprintf("Call the MCP tool %q of server %q.", tool.Name, server)
	}
	if h := hints(tool.Annotations); h != "" {
		text += "\n\n" + h
	}
	var args []string
	for _, p := range params {
		if p.doc != "" {
			args = append(args, argDoc(p.name, p.doc))
		}
	}
	if extraName != "" {
		args = append(args, argDoc("**"+extraName, "Further arguments, sent as given."))
	}
	if len(args) > 0 {
		text += "\n\nArgs:\n" + strings.Join(args, "\n")
	}
	if retDoc = normalizeText(retDoc); retDoc != "" {
		text += "\n\nReturns:\n" + indentLines(retDoc, "    ")
	}
	return text
}

func firstNonBlank(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

func argDoc(name, doc string) string {
	lines := strings.Split(doc, "\n")
	out := "    " + name + ": " + lines[0]
	for _, l := range lines[1:] {
		if l == "" {
			out += "\n"
		} else {
			out += "\n        " + l
		}
	}
	return out
}

func indentLines(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = indent + l
		}
	}
	return strings.Join(lines, "\n")
}

// hints renders the annotation hints that are set to true.
func hints(a Annotations) string {
	var h []string
	for _, x := range []struct {
		v    *bool
		name string
	}{
		{a.ReadOnlyHint, "read-only"},
		{a.DestructiveHint, "destructive"},
		{a.IdempotentHint, "idempotent"},
		{a.OpenWorldHint, "open-world"},
	} {
		if x.v != nil && *x.v {
			h = append(h, x.name)
		}
	}
	if len(h) == 0 {
		return ""
	}
	return "Hints: " + strings.Join(h, ", ") + "."
}

func joinSentence(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

func joinLines(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n" + b
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// namesIn lists the global names a type expression refers to.
func namesIn(t *pyType) map[string]bool {
	names := map[string]bool{}
	var walk func(*pyType)
	walk = func(t *pyType) {
		switch t.kind {
		case tAny:
			names["Any"] = true
		case tName:
			names[t.name] = true
		case tLiteral:
			names["Literal"] = true
		case tList:
			names["list"] = true
			walk(t.elem)
		case tDict:
			names["dict"] = true
			names["str"] = true
			walk(t.elem)
		case tUnion:
			for _, a := range t.alts {
				walk(a)
			}
		case tRef:
			names[t.def.name] = true
		}
	}
	walk(t)
	return names
}

// renderInit renders a server package's __init__.py: it imports a tool's module only when the
// tool is first used, so importing one tool of a large server stays cheap. The
// TYPE_CHECKING imports let mypy see the functions.
func renderInit(server string, fns []string) []byte {
	fns = slices.Sorted(slices.Values(fns))
	var b strings.Builder
	b.WriteString(Marker + "\n")
	docstring(&b, "", fmt.Sprintf("Tools of the MCP server %q, one module each, imported on first use.", server))
	b.WriteString("\nimport importlib\nfrom typing import TYPE_CHECKING, Any\n\n")
	b.WriteString("__all__: list[str] = [")
	for _, f := range fns {
		b.WriteString("\n    " + pyString(f) + ",")
	}
	if len(fns) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n\n")
	// mypy sees the imports; at run time __getattr__ imports on demand. Hiding __getattr__
	// from mypy keeps a misspelt tool name an error instead of an Any.
	b.WriteString("if TYPE_CHECKING:\n")
	for _, f := range fns {
		b.WriteString("    from ." + f + " import " + f + " as " + f + "\n")
	}
	if len(fns) == 0 {
		b.WriteString("    pass\n")
	}
	b.WriteString(`else:

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module("." + name, __name__), name)
        # Importing the submodule bound its name in this package to the module; rebind it
        # to the function so later attribute access finds the function too.
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
`)
	return []byte(b.String())
}
