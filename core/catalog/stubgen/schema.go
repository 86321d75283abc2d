package stubgen

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	// maxTypeDepth bounds how deep a type expression nests; deeper parts become Any. Python's
	// parser refuses expressions nested ~200 levels deep and nobody reads such a hint.
	maxTypeDepth = 24
	// schemaBudget bounds the schema nodes visited for one tool, so schemas that expand
	// exponentially (allOf over refs over allOf...) cost bounded time; the rest becomes Any.
	schemaBudget = 20000
	// maxIntDigits keeps integer literals under CPython 3.11's int/str conversion limit (4300
	// digits), which also applies to literals in source code.
	maxIntDigits = 4000
)

// typeDef is a named definition in a stub module: a TypedDict, or a type alias (for $ref
// targets that are not objects, so recursive references have a name).
type typeDef struct {
	id     int // unique in the module; the name of an alias is only known after its target
	name   string
	alias  bool
	used   bool // an alias that something refers to (recursion, or more than one $ref)
	doc    string
	fields []field // TypedDict
	target *pyType // alias
}

type field struct {
	key      string
	t        *pyType
	required bool
	doc      string
}

// module is the per-tool state shared by the input and output schema: definitions and their
// names live in one Python module.
type module struct {
	names    *namer
	dicts    map[*jv]*typeDef // TypedDicts by object schema
	aliases  map[*jv]*typeDef // aliases by $ref target
	merged   map[*jv]*jv
	budget   int
	ids      int
	warnings []string
	warned   map[string]bool
}

func newModule(reserved ...string) *module {
	m := &module{
		names:   newNamer(false, pyBuiltins, moduleNames, setOf(reserved...)),
		dicts:   map[*jv]*typeDef{},
		aliases: map[*jv]*typeDef{},
		merged:  map[*jv]*jv{},
		budget:  schemaBudget,
		warned:  map[string]bool{},
	}
	return m
}

func (m *module) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !m.warned[msg] {
		m.warned[msg] = true
		m.warnings = append(m.warnings, msg)
	}
}

func (m *module) newID() int {
	m.ids++
	return m.ids
}

func (m *module) typeName(hint string) string {
	return m.names.claim(identifier(hint, "Type"))
}

// typer maps the schemas of one document (an input or an output schema) to Python types.
type typer struct {
	mod      *module
	root     *jv
	rootName string // name of the root's TypedDict if something refers to "#"
	base     string // name stem for the root's children
	what     string // "input" or "output", for warnings
}

// typeOf maps schema s. hint names TypedDicts made for inline objects; direct lists the type
// aliases whose definition is being computed with no container in between, where a reference
// back to them would be a cyclic alias mypy rejects.
func (t *typer) typeOf(s *jv, hint string, depth int, direct []*typeDef) *pyType {
	m := t.mod
	if s == nil || s.kind != jObject {
		return anyType // true, false and malformed schemas
	}
	if depth > maxTypeDepth || m.budget <= 0 {
		m.warn("%s schema nests too deep or is too large; the rest is typed as Any", t.what)
		return anyType
	}
	m.budget--
	var ty *pyType
	if ref, ok := s.str("$ref"); ok {
		ty = t.ref(ref, depth, direct)
	} else {
		ty = t.plain(s, hint, depth, direct)
	}
	if s.isTrue("nullable") {
		ty = union(ty, noneType)
	}
	return ty
}

func (t *typer) plain(s *jv, hint string, depth int, direct []*typeDef) *pyType {
	if c := s.get("const"); c != nil {
		return literalType([]*jv{c})
	}
	if e := s.get("enum"); e != nil && e.kind == jArray {
		return literalType(e.arr)
	}
	own := t.allOf(s, hint, depth, direct)
	if own == nil {
		own = t.ownType(s, hint, depth)
	}
	alts := append(append([]*jv(nil), s.list("anyOf")...), s.list("oneOf")...)
	if len(alts) == 0 {
		if own == nil {
			return anyType
		}
		return own
	}
	objects := 0
	for _, a := range alts {
		if objectLike(a) {
			objects++
		}
	}
	ts := make([]*pyType, 0, len(alts))
	for i, a := range alts {
		if own != nil && constraintOnly(a) {
			ts = append(ts, own) // {"type": "string", "anyOf": [{"format": ...}, ...]}
			continue
		}
		h := hint
		if objects > 1 {
			h = hint + "Variant" + strconv.Itoa(i+1)
		}
		ts = append(ts, t.typeOf(a, h, depth+1, direct))
	}
	u := union(ts...)
	if u.kind == tAny && own != nil {
		return own
	}
	return u
}

// ownType maps the "type" keyword (or, without it, the keywords that imply one); nil when
// the schema says nothing about its type.
func (t *typer) ownType(s *jv, hint string, depth int) *pyType {
	var names []string
	switch tv := s.get("type"); {
	case tv != nil && tv.kind == jString:
		names = []string{tv.s}
	case tv != nil && tv.kind == jArray:
		for _, e := range tv.arr {
			if e.kind == jString {
				names = append(names, e.s)
			}
		}
	case s.has("properties") || s.has("additionalProperties") || s.has("patternProperties"):
		names = []string{"object"}
	case s.has("items") || s.has("prefixItems"):
		names = []string{"array"}
	}
	if len(names) == 0 {
		return nil
	}
	ts := make([]*pyType, 0, len(names))
	for _, n := range names {
		switch n {
		case "string":
			ts = append(ts, strType)
		case "integer":
			ts = append(ts, intType)
		case "number":
			ts = append(ts, floatType)
		case "boolean":
			ts = append(ts, boolType)
		case "null":
			ts = append(ts, noneType)
		case "array":
			ts = append(ts, listOf(t.items(s, hint, depth)))
		case "object":
			ts = append(ts, t.object(s, hint, depth))
		default:
			ts = append(ts, anyType)
		}
	}
	return union(ts...)
}

// items maps the element type of an array: "items", or the tuple forms ("prefixItems", or
// "items" as an array in older drafts) as the union of their members and of what may follow.
func (t *typer) items(s *jv, hint string, depth int) *pyType {
	tuple := s.list("prefixItems")
	rest := s.get("items")
	if rest != nil && rest.kind == jArray {
		tuple = append(append([]*jv(nil), tuple...), rest.arr...)
		rest = s.get("additionalItems")
	}
	ts := make([]*pyType, 0, len(tuple)+1)
	for _, p := range tuple {
		ts = append(ts, t.typeOf(p, hint+"Item", depth+1, nil))
	}
	switch {
	case rest == nil:
		ts = append(ts, anyType)
	case isFalse(rest):
	default:
		ts = append(ts, t.typeOf(rest, hint+"Item", depth+1, nil))
	}
	return union(ts...)
}

func isFalse(v *jv) bool { return v != nil && v.kind == jBool && !v.b }

// object maps an object schema: a TypedDict when it names properties, else a dict.
func (t *typer) object(s *jv, hint string, depth int) *pyType {
	if p := s.get("properties"); p != nil && p.kind == jObject && len(p.keys) > 0 {
		return refTo(t.typedDict(s, hint, depth))
	}
	if ap := s.get("additionalProperties"); ap != nil && ap.kind == jObject {
		return dictOf(t.typeOf(ap, hint+"Value", depth+1, nil))
	}
	if pp := s.get("patternProperties"); pp != nil && pp.kind == jObject && len(pp.vals) > 0 {
		ts := make([]*pyType, len(pp.vals))
		for i, v := range pp.vals {
			ts[i] = t.typeOf(v, hint+"Value", depth+1, nil)
		}
		return dictOf(union(ts...))
	}
	return dictOf(anyType)
}

// typedDict returns the TypedDict for an object schema with properties, made once per schema
// node so recursive references reach the same class.
func (t *typer) typedDict(s *jv, name string, depth int) *typeDef {
	m := t.mod
	if d := m.dicts[s]; d != nil {
		return d
	}
	d := &typeDef{id: m.newID(), name: m.typeName(name)}
	d.doc, _ = s.str("description")
	m.dicts[s] = d
	required := map[string]bool{}
	for _, r := range s.list("required") {
		if r.kind == jString {
			required[r.s] = true
		}
	}
	props := s.get("properties")
	for i, key := range props.keys {
		ps := props.vals[i]
		doc, _ := ps.str("description")
		doc = joinLines(normalizeText(doc), valueDocs(ps))
		d.fields = append(d.fields, field{
			key:      key,
			t:        t.typeOf(ps, name+camel(key), depth+1, nil),
			required: required[key],
			doc:      doc,
		})
	}
	return d
}

// ref maps a "$ref". Only references inside the document ("#...") resolve; each target gets
// one named definition, which makes recursive schemas finite.
func (t *typer) ref(ref string, depth int, direct []*typeDef) *pyType {
	m := t.mod
	if !strings.HasPrefix(ref, "#") {
		m.warn("%s schema: $ref %q is not local; typed as Any", t.what, ref)
		return anyType
	}
	target, tokens := pointer(t.root, ref[1:])
	if target == nil {
		m.warn("%s schema: $ref %q does not resolve; typed as Any", t.what, ref)
		return anyType
	}
	if plainObject(target) {
		return refTo(t.typedDict(target, t.refName(target, tokens), depth))
	}
	if d := m.aliases[target]; d != nil {
		for _, x := range direct {
			if x == d {
				m.warn("%s schema: $ref %q refers to itself with no object or array in between; typed as Any", t.what, ref)
				return anyType
			}
		}
		d.used = true
		return refTo(d)
	}
	name := t.refName(target, tokens)
	d := &typeDef{id: m.newID(), alias: true}
	m.aliases[target] = d
	d.target = t.typeOf(target, name, depth+1, append(direct, d))
	// A reference into a definitions section names a concept (an enum, say) worth its alias;
	// any other non-recursive target ("#/properties/data/properties/name") is inlined.
	named := len(tokens) == 2 && (tokens[0] == "$defs" || tokens[0] == "definitions")
	if !d.used && !named {
		delete(m.aliases, target)
		return d.target
	}
	d.name = m.typeName(name)
	d.doc, _ = target.str("description")
	return refTo(d)
}

// refName derives a type name from a JSON pointer the way inline objects are named:
// "#/$defs/Entity" → Entity, "#/properties/data/items" → <Tool>DataItem.
func (t *typer) refName(target *jv, tokens []string) string {
	if target == t.root {
		return t.rootName
	}
	name := t.base
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		next := ""
		if i+1 < len(tokens) {
			next = tokens[i+1]
		}
		switch tok {
		case "$defs", "definitions":
			if next != "" {
				name = camel(next)
				i++
			}
		case "properties", "patternProperties":
			if next != "" {
				name += camel(next)
				i++
			}
		case "items", "prefixItems", "additionalItems":
			name += "Item"
			if _, err := strconv.Atoi(next); err == nil {
				i++
			}
		case "additionalProperties":
			name += "Value"
		case "anyOf", "oneOf", "allOf":
			if n, err := strconv.Atoi(next); err == nil {
				name += "Variant" + strconv.Itoa(n+1)
				i++
			}
		default:
			name += camel(tok)
		}
	}
	return name
}

// allOf maps an allOf: objects merge into one TypedDict (a value must satisfy every member);
// otherwise any single member's type admits every valid value, so the first meaningful one
// stands for all. nil when the schema has no allOf.
func (t *typer) allOf(s *jv, hint string, depth int, direct []*typeDef) *pyType {
	all := s.list("allOf")
	if len(all) == 0 {
		return nil
	}
	var members []*jv
	for _, a := range all {
		if !constraintOnly(a) {
			members = append(members, a)
		}
	}
	props := s.get("properties")
	hasProps := props != nil && props.kind == jObject && len(props.keys) > 0
	if len(members) == 0 {
		return nil
	}
	if len(members) == 1 && !hasProps {
		return t.typeOf(members[0], hint, depth+1, direct)
	}
	merged := t.mod.merged[s]
	if merged == nil {
		merged = t.mergeObjects(s, members)
		t.mod.merged[s] = merged
	}
	if merged.kind == jNull {
		return t.typeOf(members[0], hint, depth+1, direct)
	}
	if p := merged.get("properties"); len(p.keys) == 0 {
		return dictOf(anyType)
	}
	return refTo(t.typedDict(merged, hint, depth))
}

// mergeObjects builds one object schema from s and its allOf members (followed through local
// $refs); a null value when some member is not an object.
func (t *typer) mergeObjects(s *jv, members []*jv) *jv {
	props := &jv{kind: jObject}
	req := &jv{kind: jArray}
	seenReq := map[string]bool{}
	add := func(o *jv) {
		if p := o.get("properties"); p != nil && p.kind == jObject {
			for i, k := range p.keys {
				if props.index(k) < 0 {
					props.keys = append(props.keys, k)
					props.vals = append(props.vals, p.vals[i])
				}
			}
		}
		for _, r := range o.list("required") {
			if r.kind == jString && !seenReq[r.s] {
				seenReq[r.s] = true
				req.arr = append(req.arr, r)
			}
		}
	}
	add(s)
	for _, mem := range members {
		o := t.follow(mem)
		if o == nil || !objectLike(o) {
			return &jv{kind: jNull}
		}
		add(o)
	}
	out := &jv{kind: jObject,
		keys: []string{"type", "properties", "required"},
		vals: []*jv{{kind: jString, s: "object"}, props, req}}
	if d := s.get("description"); d != nil {
		out.keys = append(out.keys, "description")
		out.vals = append(out.vals, d)
	}
	return out
}

// follow resolves a chain of local $refs (bounded, cycles give nil).
func (t *typer) follow(s *jv) *jv {
	for range 16 {
		ref, ok := s.str("$ref")
		if !ok {
			return s
		}
		if !strings.HasPrefix(ref, "#") {
			return nil
		}
		if s, _ = pointer(t.root, ref[1:]); s == nil {
			return nil
		}
	}
	return nil
}

// objectLike reports schemas that describe objects.
func objectLike(s *jv) bool {
	if s == nil || s.kind != jObject {
		return false
	}
	if ty, ok := s.str("type"); ok {
		return ty == "object"
	}
	return s.has("properties")
}

// plainObject reports an object schema that maps straight to a TypedDict (no combinators
// or enums that would change its type).
func plainObject(s *jv) bool {
	if !objectLike(s) {
		return false
	}
	for _, k := range []string{"$ref", "const", "enum", "anyOf", "oneOf", "allOf", "nullable"} {
		if s.has(k) {
			return false
		}
	}
	p := s.get("properties")
	return p != nil && p.kind == jObject && len(p.keys) > 0
}

// typeKeywords are the keywords that say what a schema is (as opposed to constraining it).
var typeKeywords = []string{"type", "$ref", "enum", "const", "properties", "additionalProperties",
	"patternProperties", "items", "prefixItems", "anyOf", "oneOf", "allOf", "nullable"}

// constraintOnly reports schemas that only constrain (minLength, required, format...) or
// are boolean schemas: as union members they add no type of their own.
func constraintOnly(s *jv) bool {
	if s == nil || s.kind != jObject {
		return true
	}
	for _, k := range typeKeywords {
		if s.has(k) {
			return false
		}
	}
	return true
}

// valueDocs lists the descriptions of values enumerated as anyOf/oneOf members with a const
// each (how zod and pydantic document every value), since Literal[...] cannot carry them.
func valueDocs(s *jv) string {
	var parts []string
	for _, a := range append(append([]*jv(nil), s.list("anyOf")...), s.list("oneOf")...) {
		c := a.get("const")
		d, _ := a.str("description")
		d = strings.Join(strings.Fields(d), " ")
		if c == nil || d == "" {
			continue
		}
		lit, ok := pyLiteral(c)
		if !ok {
			lit = c.compact()
		}
		parts = append(parts, lit+" = "+d)
	}
	if len(parts) == 0 {
		return ""
	}
	return "Values: " + strings.Join(parts, ", ") + "."
}
