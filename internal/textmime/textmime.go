// Package textmime says which mime types are text: content of those types
// is shown to the model as text, and so checked for PII.
package textmime

import "strings"

// Is reports whether a mime type (parameters allowed) is text.
func Is(m string) bool {
	m, _, _ = strings.Cut(m, ";")
	m = strings.ToLower(strings.TrimSpace(m))
	return strings.HasPrefix(m, "text/") || strings.HasSuffix(m, "+json") || strings.HasSuffix(m, "+xml") ||
		m == "application/json" || m == "application/xml" || m == "application/yaml" || m == "application/x-yaml"
}
