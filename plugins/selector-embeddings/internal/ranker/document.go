package ranker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"
)

// Doc is one searchable tool or skill as the ranker sees it.
type Doc struct {
	// ID is unique in the index ("server/name" for tools).
	ID     string
	Kind   string
	Server string
	Name   string
	// Description is free text; its first sentence is also indexed as the
	// summary field.
	Description string
	// InputSchema is the tool's JSON Schema; property names and their
	// descriptions (nested objects, arrays and combinators included) are
	// indexed as the parameter fields.
	InputSchema json.RawMessage
	// Hash identifies the content; an upsert whose hash equals the indexed
	// one is skipped. Empty means ContentHash(doc).
	Hash string
}

// ContentHash returns a hash of everything the ranker indexes from d.
func ContentHash(d Doc) string {
	h := sha256.New()
	for _, s := range []string{d.Kind, d.Server, d.Name, d.Description, string(d.InputSchema)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Field is one separately weighted part of a document.
type Field uint8

// The indexed fields.
const (
	FieldName Field = iota
	FieldServer
	// FieldSummary is the first sentence of the description: tool authors
	// put what the tool does there, and the rest is usage detail.
	FieldSummary
	FieldDescription
	FieldParamNames
	// FieldParamDescriptions holds parameter descriptions and enum values.
	FieldParamDescriptions
	// NumFields is the number of fields.
	NumFields
)

// String returns the field's config name.
func (f Field) String() string {
	switch f {
	case FieldName:
		return "name"
	case FieldServer:
		return "server"
	case FieldSummary:
		return "summary"
	case FieldDescription:
		return "description"
	case FieldParamNames:
		return "param_names"
	case FieldParamDescriptions:
		return "param_descriptions"
	}
	return "unknown"
}

// Limits on what a schema walk reads, so one hostile schema cannot make
// indexing slow or memory hungry.
const (
	maxSchemaDepth = 16
	maxFieldBytes  = 16 << 10
)

// Fields returns the text of each field of d.
func Fields(d Doc) [NumFields]string {
	var f [NumFields]string
	f[FieldName] = d.Name
	f[FieldServer] = d.Server
	f[FieldSummary] = FirstSentence(d.Description)
	f[FieldDescription] = truncate(d.Description)
	if len(d.InputSchema) > 0 {
		var schema any
		if json.Unmarshal(d.InputSchema, &schema) == nil {
			var names, descs strings.Builder
			walkSchema(schema, 0, &names, &descs)
			f[FieldParamNames] = truncate(names.String())
			f[FieldParamDescriptions] = truncate(descs.String())
		}
	}
	return f
}

func truncate(s string) string {
	if len(s) <= maxFieldBytes {
		return s
	}
	s = s[:maxFieldBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// schemaChildren are the JSON Schema keywords whose values are schemas or
// lists of schemas that can declare more parameters.
var schemaChildren = []string{"items", "additionalProperties", "anyOf", "oneOf", "allOf", "not", "prefixItems", "$defs", "definitions"}

func walkSchema(v any, depth int, names, descs *strings.Builder) {
	if depth > maxSchemaDepth || names.Len()+descs.Len() > 2*maxFieldBytes {
		return
	}
	switch s := v.(type) {
	case []any:
		for _, x := range s {
			walkSchema(x, depth+1, names, descs)
		}
	case map[string]any:
		if props, ok := s["properties"].(map[string]any); ok {
			for _, k := range sortedKeys(props) {
				names.WriteString(k)
				names.WriteByte(' ')
				p, _ := props[k].(map[string]any)
				if p == nil {
					continue
				}
				if d, ok := p["description"].(string); ok {
					descs.WriteString(d)
					descs.WriteByte('\n')
				}
				if enum, ok := p["enum"].([]any); ok {
					for _, e := range enum {
						if es, ok := e.(string); ok {
							descs.WriteString(es)
							descs.WriteByte(' ')
						}
					}
					descs.WriteByte('\n')
				}
				walkSchema(p, depth+1, names, descs)
			}
		}
		for _, k := range schemaChildren {
			if c, ok := s[k]; ok {
				if m, ok := c.(map[string]any); ok && (k == "$defs" || k == "definitions") {
					for _, name := range sortedKeys(m) {
						walkSchema(m[name], depth+1, names, descs)
					}
					continue
				}
				walkSchema(c, depth+1, names, descs)
			}
		}
	}
}

// sortedKeys keeps the walk deterministic, so the same schema always yields
// the same (possibly truncated) text.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FirstSentence returns description up to its first sentence end: a '.',
// '!' or '?' followed by white space, a CJK full stop, or a blank line.
func FirstSentence(description string) string {
	s := strings.TrimSpace(description)
	for i, r := range s {
		switch r {
		case '。', '！', '？':
			return s[:i]
		case '.', '!', '?':
			rest := s[i+1:]
			if rest == "" || rest[0] == ' ' || rest[0] == '\n' || rest[0] == '\t' {
				return s[:i]
			}
		case '\n':
			if strings.HasPrefix(strings.TrimLeft(s[i+1:], " \t"), "\n") {
				return s[:i]
			}
		}
	}
	return s
}
