package stubgen

import (
	"slices"
	"strings"
)

// renderer writes the definitions of one module in dependency order and renders type
// expressions. Stubs do not use `from __future__ import annotations`, so annotations are real
// objects at run time (typing.get_type_hints works). Recursion needs forward references:
// those are quoted where Python keeps strings as they are (annotations, TypedDict fields,
// list[...] arguments), but a type alias must never be a string at run time (it could not
// take part in "A | None"), so an alias whose top level refers to a TypedDict still being
// written waits until that TypedDict is written.
type renderer struct {
	defined  map[*typeDef]bool
	visiting map[*typeDef]bool
	pending  []*typeDef      // aliases waiting for a TypedDict
	imports  map[string]bool // names imported from typing
	// annotNames are the names annotations use; a TypedDict key spelled like one of them
	// would shadow it inside a class body, so such TypedDicts use the functional syntax.
	annotNames map[string]bool
}

func newRenderer(m *module) *renderer {
	r := &renderer{
		defined:    map[*typeDef]bool{},
		visiting:   map[*typeDef]bool{},
		imports:    map[string]bool{},
		annotNames: setOf("str", "int", "float", "bool", "list", "dict", "Any", "Literal", "NotRequired", "Required", "TypedDict", "TypeAlias"),
	}
	for _, d := range m.dicts {
		r.annotNames[d.name] = true
	}
	for _, d := range m.aliases {
		r.annotNames[d.name] = true
	}
	return r
}

func (r *renderer) use(name string) { r.imports[name] = true }

// typingImports lists the typing names the module uses, sorted.
func (r *renderer) typingImports() []string {
	var names []string
	for n := range r.imports {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// expr renders t and reports whether it must be quoted where evaluated at run time.
func (r *renderer) expr(t *pyType) (string, bool) {
	switch t.kind {
	case tAny:
		r.use("Any")
		return "Any", false
	case tName:
		return t.name, false
	case tLiteral:
		r.use("Literal")
		return "Literal[" + strings.Join(t.lits, ", ") + "]", false
	case tList:
		s, q := r.expr(t.elem)
		return "list[" + s + "]", q
	case tDict:
		s, q := r.expr(t.elem)
		return "dict[str, " + s + "]", q
	case tRef:
		return t.def.name, !r.defined[t.def]
	}
	parts := make([]string, len(t.alts))
	forward := false
	for i, a := range t.alts {
		s, f := r.expr(a)
		parts[i] = s
		forward = forward || f
	}
	return strings.Join(parts, " | "), forward
}

// annotation renders t where Python keeps a string as a forward reference: quoted as a whole
// when it names something not written yet.
func (r *renderer) annotation(t *pyType) string {
	s, forward := r.expr(t)
	if forward {
		return pyString(s)
	}
	return s
}

// value renders an alias's right-hand side, whose top-level references are all written, so
// that it is a typing object at run time.
func (r *renderer) value(t *pyType) string {
	switch t.kind {
	case tList:
		return "list[" + r.annotation(t.elem) + "]"
	case tDict:
		return "dict[str, " + r.annotation(t.elem) + "]"
	case tUnion:
		parts := make([]string, len(t.alts))
		for i, a := range t.alts {
			parts[i] = r.value(a)
		}
		return strings.Join(parts, " | ")
	}
	s, _ := r.expr(t)
	return s
}

// emitAll writes the definitions the given types need, then the aliases that waited.
func (r *renderer) emitAll(b *strings.Builder, ts ...*pyType) {
	for _, t := range ts {
		r.emitDeps(b, t)
	}
	// Aliases form no cycle among themselves at the top level (the typer turns such cycles
	// into Any), so each round writes at least one of the waiting ones.
	for progress := true; progress; {
		progress = false
		pending := r.pending
		r.pending = nil
		for _, d := range pending {
			r.emit(b, d)
			progress = progress || r.defined[d]
		}
	}
}

// emitDeps writes the definitions t refers to that are not written yet.
func (r *renderer) emitDeps(b *strings.Builder, t *pyType) {
	switch t.kind {
	case tList, tDict:
		r.emitDeps(b, t.elem)
	case tUnion:
		for _, a := range t.alts {
			r.emitDeps(b, a)
		}
	case tRef:
		r.emit(b, t.def)
	}
}

// emit writes d after its dependencies (post-order). A cycle is cut at the definition being
// visited: a TypedDict quotes its references to what follows it, and an alias whose top
// level refers to a TypedDict still being written is left for that TypedDict to write
// after itself.
func (r *renderer) emit(b *strings.Builder, d *typeDef) {
	if r.defined[d] || r.visiting[d] {
		return
	}
	r.visiting[d] = true
	defer delete(r.visiting, d)
	if d.alias {
		r.emitDeps(b, d.target)
		if !r.topLevelDefined(d.target) {
			r.pending = append(r.pending, d)
			return
		}
		r.use("TypeAlias")
		if d.doc != "" {
			comment(b, "", d.doc)
		}
		b.WriteString(d.name + ": TypeAlias = " + r.value(d.target) + "\n\n\n")
		r.defined[d] = true
		return
	}
	for _, f := range d.fields {
		r.emitDeps(b, f.t)
	}
	r.typedDict(b, d)
	r.defined[d] = true
	for _, f := range d.fields {
		r.emitDeps(b, f.t) // aliases that waited for d
	}
}

// topLevelDefined reports whether the references at the top level of t (itself or its union
// members, not inside list[...] or dict[...]) are all written.
func (r *renderer) topLevelDefined(t *pyType) bool {
	switch t.kind {
	case tRef:
		return r.defined[t.def]
	case tUnion:
		for _, a := range t.alts {
			if a.kind == tRef && !r.defined[a.def] {
				return false
			}
		}
	}
	return true
}

// typedDict writes a TypedDict. With more optional keys than required ones it is total=False
// and marks the required keys, else it marks the optional ones.
func (r *renderer) typedDict(b *strings.Builder, d *typeDef) {
	r.use("TypedDict")
	required := 0
	classSyntax := true
	for _, f := range d.fields {
		if f.required {
			required++
		}
		if !IsIdentifier(f.key) || strings.HasPrefix(f.key, "__") || r.annotNames[f.key] {
			classSyntax = false // not an identifier, or would be mangled or shadow a name
		}
	}
	total := 2*required >= len(d.fields)
	ann := func(f field) string {
		a := r.annotation(f.t)
		switch {
		case total && !f.required:
			r.use("NotRequired")
			return "NotRequired[" + a + "]"
		case !total && f.required:
			r.use("Required")
			return "Required[" + a + "]"
		}
		return a
	}
	if classSyntax {
		b.WriteString("class " + d.name + "(TypedDict")
		if !total {
			b.WriteString(", total=False")
		}
		b.WriteString("):\n")
		if d.doc != "" {
			docstring(b, "    ", d.doc)
			b.WriteString("\n")
		}
		for _, f := range d.fields {
			if f.doc != "" {
				comment(b, "    ", f.doc)
			}
			b.WriteString("    " + f.key + ": " + ann(f) + "\n")
		}
	} else {
		if d.doc != "" {
			comment(b, "", d.doc)
		}
		b.WriteString(d.name + " = TypedDict(\n    " + pyString(d.name) + ",\n    {\n")
		for _, f := range d.fields {
			if f.doc != "" {
				comment(b, "        ", f.doc)
			}
			b.WriteString("        " + pyString(f.key) + ": " + ann(f) + ",\n")
		}
		b.WriteString("    },\n")
		if !total {
			b.WriteString("    total=False,\n")
		}
		b.WriteString(")\n")
	}
	b.WriteString("\n\n")
}
