package stubgen

import (
	"strconv"
	"strings"
)

// typeKind says which form a pyType takes.
type typeKind uint8

const (
	tAny     typeKind = iota
	tName             // a builtin: str, int, float, bool, None
	tLiteral          // Literal[...] of strings, ints and bools
	tList             // list[elem]
	tDict             // dict[str, elem]
	tUnion            // alts joined by |
	tRef              // a TypedDict or type alias defined in the module
)

// pyType is the Python type a schema maps to, before rendering: rendering depends on which
// definitions precede it in the module (forward references must be quoted).
type pyType struct {
	kind typeKind
	name string   // tName
	lits []string // tLiteral, as Python literal expressions
	elem *pyType  // tList, tDict
	alts []*pyType
	def  *typeDef // tRef
}

var (
	anyType   = &pyType{kind: tAny}
	strType   = &pyType{kind: tName, name: "str"}
	intType   = &pyType{kind: tName, name: "int"}
	floatType = &pyType{kind: tName, name: "float"}
	boolType  = &pyType{kind: tName, name: "bool"}
	noneType  = &pyType{kind: tName, name: "None"}
)

func listOf(t *pyType) *pyType { return &pyType{kind: tList, elem: t} }

func dictOf(t *pyType) *pyType { return &pyType{kind: tDict, elem: t} }

func refTo(d *typeDef) *pyType { return &pyType{kind: tRef, def: d} }

// key identifies a type structurally, for deduplicating union members.
func (t *pyType) key() string {
	switch t.kind {
	case tAny:
		return "Any"
	case tName:
		return t.name
	case tLiteral:
		return "Literal[" + strings.Join(t.lits, ", ") + "]"
	case tList:
		return "list[" + t.elem.key() + "]"
	case tDict:
		return "dict[str, " + t.elem.key() + "]"
	case tRef:
		return "@" + strconv.Itoa(t.def.id)
	}
	parts := make([]string, len(t.alts))
	for i, a := range t.alts {
		parts[i] = a.key()
	}
	return strings.Join(parts, " | ")
}

// union joins types into a flat, deduplicated union: Any absorbs everything, int and literals
// are dropped next to the builtin that already admits them (mypy treats int as a float), all
// literals merge into one Literal[...], and None goes last.
func union(ts ...*pyType) *pyType {
	var flat []*pyType
	for _, t := range ts {
		if t.kind == tUnion {
			flat = append(flat, t.alts...)
		} else {
			flat = append(flat, t)
		}
	}
	names := map[string]bool{}
	for _, t := range flat {
		if t.kind == tAny {
			return anyType
		}
		if t.kind == tName {
			names[t.name] = true
		}
	}
	var out []*pyType
	var lits []string
	litAt := -1
	seen := map[string]bool{}
	for _, t := range flat {
		switch {
		case t.kind == tName && t.name == "None":
			continue
		case t.kind == tName && t.name == "int" && names["float"]:
			continue
		case t.kind == tLiteral:
			for _, l := range t.lits {
				if !seen["lit:"+l] && !literalSubsumed(l, names) {
					seen["lit:"+l] = true
					lits = append(lits, l)
				}
			}
			if litAt < 0 {
				litAt = len(out)
				out = append(out, nil)
			}
			continue
		}
		if k := t.key(); !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	if litAt >= 0 {
		if len(lits) > 0 {
			out[litAt] = &pyType{kind: tLiteral, lits: lits}
		} else {
			out = append(out[:litAt], out[litAt+1:]...)
		}
	}
	if names["None"] {
		out = append(out, noneType)
	}
	switch len(out) {
	case 0:
		return anyType
	case 1:
		return out[0]
	}
	return &pyType{kind: tUnion, alts: out}
}

// literalSubsumed reports whether a literal adds nothing next to the builtins present.
func literalSubsumed(lit string, names map[string]bool) bool {
	switch {
	case lit == "True" || lit == "False":
		return names["bool"]
	case strings.HasPrefix(lit, `"`):
		return names["str"]
	}
	return names["int"] || names["float"]
}

// literalType maps enum/const values: strings, integers and booleans become one Literal[...],
// null becomes None, other values their builtin type.
func literalType(vals []*jv) *pyType {
	if len(vals) == 0 {
		return anyType
	}
	ts := make([]*pyType, 0, len(vals))
	for _, v := range vals {
		if l, ok := pyLiteral(v); ok {
			ts = append(ts, &pyType{kind: tLiteral, lits: []string{l}})
			continue
		}
		switch v.kind {
		case jNull:
			ts = append(ts, noneType)
		case jNumber:
			ts = append(ts, floatType)
		case jArray:
			ts = append(ts, listOf(anyType))
		default:
			ts = append(ts, dictOf(anyType))
		}
	}
	return union(ts...)
}

// pyLiteral renders a JSON value as a Python literal usable in Literal[...] and as a default.
func pyLiteral(v *jv) (string, bool) {
	switch v.kind {
	case jString:
		return pyString(v.s), true
	case jBool:
		if v.b {
			return "True", true
		}
		return "False", true
	case jNumber:
		if v.isInt() && len(v.s) <= maxIntDigits {
			if v.s == "-0" {
				return "0", true
			}
			return v.s, true
		}
	}
	return "", false
}

// admits reports whether a JSON scalar is a value of t, so it can be a parameter's Python
// default without a type error.
func admits(t *pyType, v *jv) bool {
	switch t.kind {
	case tAny:
		return v.kind != jArray && v.kind != jObject
	case tName:
		switch t.name {
		case "str":
			return v.kind == jString
		case "int":
			return v.isInt() && len(v.s) <= maxIntDigits
		case "float":
			return v.kind == jNumber && (!v.isInt() || len(v.s) <= maxIntDigits)
		case "bool":
			return v.kind == jBool
		case "None":
			return v.kind == jNull
		}
	case tLiteral:
		l, ok := pyLiteral(v)
		if !ok {
			return false
		}
		for _, x := range t.lits {
			if x == l {
				return true
			}
		}
	case tUnion:
		for _, a := range t.alts {
			if admits(a, v) {
				return true
			}
		}
	}
	return false
}
