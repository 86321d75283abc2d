// Package schemamsg words JSON Schema validation errors
// (santhosh-tekuri/jsonschema) as sentences that name the argument at
// fault, for messages a model reads: `missing required argument "code"`,
// `argument "limit": must be at least 1, got 0`.
package schemamsg

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// maxProblems is how many validation problems one error message lists.
const maxProblems = 3

// Describe turns the library's error tree into a short message naming the
// arguments at fault: the leaves of the tree (the keywords that failed),
// at most maxProblems of them.
func Describe(err *jsonschema.ValidationError) string {
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if m, ok := typeAlternatives(e); ok {
			if !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
			return
		}
		if len(e.Causes) == 0 {
			if m := problem(e); !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(err)
	if len(msgs) > maxProblems {
		msgs = append(msgs[:maxProblems], fmt.Sprintf("and %d more", len(msgs)-maxProblems))
	}
	return strings.Join(msgs, "; ")
}

// problem words one failed keyword: `argument "path": expected string, got
// number`; below the top level the JSON pointer says where:
// `argument "entities" at /entities/0/name: expected string, got number`.
func problem(e *jsonschema.ValidationError) string {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(loc) == 0 {
			return plural("missing required argument", k.Missing) + " " + quoteList(k.Missing)
		}
		return where(loc) + ": " + plural("missing required property", k.Missing) + " " + quoteList(k.Missing)
	case *kind.AdditionalProperties:
		if len(loc) == 0 {
			return plural("unexpected argument", k.Properties) + " " + quoteList(k.Properties)
		}
		return where(loc) + ": " + plural("unexpected property", k.Properties) + " " + quoteList(k.Properties)
	case *kind.Type:
		if len(loc) == 0 {
			return fmt.Sprintf("arguments must be %s, got %s", article(k.Want), k.Got)
		}
		return fmt.Sprintf("%s: expected %s, got %s", where(loc), strings.Join(k.Want, " or "), k.Got)
	}
	msg := sentence(e.ErrorKind)
	if len(loc) == 0 {
		return "arguments: " + msg
	}
	return where(loc) + ": " + msg
}

// sentence words the bounds keywords, which the library words as
// "minimum: got 0, want 1", and enum and const with their values as JSON;
// other keywords keep the library's words.
func sentence(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, got %s", num(k.Want), num(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, got %s", num(k.Want), num(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", num(k.Want), num(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, got %s", num(k.Want), num(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", num(k.Want), num(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %s, got %d", count(k.Want, "item"), k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %s, got %d", count(k.Want, "item"), k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %s, got %d", count(k.Want, "property"), k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %s, got %d", count(k.Want, "property"), k.Got)
	case *kind.Enum:
		vals := make([]string, len(k.Want))
		for i, v := range k.Want {
			vals[i] = jsonText(v)
		}
		return fmt.Sprintf("must be one of %s; got %s", strings.Join(vals, ", "), jsonText(k.Got))
	case *kind.Const:
		return fmt.Sprintf("must be %s, got %s", jsonText(k.Want), jsonText(k.Got))
	case *kind.UniqueItems:
		return fmt.Sprintf("items must be unique, but items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	}
	return k.LocalizedString(printer)
}

// typeAlternatives words a oneOf or anyOf none of whose alternatives
// matched, where each failed only on its type, as one problem: `argument
// "v": expected string or integer, got array`.
func typeAlternatives(e *jsonschema.ValidationError) (string, bool) {
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
	case *kind.OneOf:
		if len(k.Subschemas) > 0 {
			return "", false
		}
	default:
		return "", false
	}
	if len(e.InstanceLocation) == 0 || len(e.Causes) == 0 {
		return "", false
	}
	var want []string
	var got string
	for _, c := range e.Causes {
		t, ok := c.ErrorKind.(*kind.Type)
		if !ok || len(c.Causes) > 0 || !slices.Equal(c.InstanceLocation, e.InstanceLocation) {
			return "", false
		}
		want, got = append(want, t.Want...), t.Got
	}
	return fmt.Sprintf("%s: expected %s, got %s", where(e.InstanceLocation), strings.Join(slices.Compact(want), " or "), got), true
}

// jsonText shows a value as JSON, as the schema and the model write it
// (null, not Go's <nil>).
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// num prints a schema bound as a plain number.
func num(r *big.Rat) string {
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %s", n, plural(noun, []string{noun, noun}))
}

func where(loc []string) string {
	arg := fmt.Sprintf("argument %q", loc[0])
	if len(loc) == 1 {
		return arg
	}
	return arg + " at " + pointer(loc)
}

// pointer is the RFC 6901 JSON pointer of an instance location.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func plural(noun string, items []string) string {
	switch {
	case len(items) < 2:
		return noun
	case strings.HasSuffix(noun, "y"):
		return noun[:len(noun)-1] + "ies"
	default:
		return noun + "s"
	}
}

// quoteList quotes names in sorted order: the validator collects them from
// a map, and a message should not change from one call to the next.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	slices.Sort(q)
	return strings.Join(q, ", ")
}

func article(types []string) string {
	if len(types) == 1 && types[0] == "object" {
		return "an object"
	}
	return strings.Join(types, " or ")
}
