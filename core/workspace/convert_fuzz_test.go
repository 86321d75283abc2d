package workspace

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzYAMLToJSON feeds arbitrary documents to the bounded YAML reader:
// whatever the input, it must not panic, and what it accepts is one valid
// JSON value within the size limit.
func FuzzYAMLToJSON(f *testing.F) {
	for _, s := range []string{
		"", "a: 1\n", "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\nl: [*b, *b]\n",
		"? [a, b]\n: c\n", "x: .inf\n", "a: !!binary aGVsbG8=\n",
		aliasBomb(), mergeBomb(), strings.Repeat("[", 1100) + strings.Repeat("]", 1100),
		"a: &a [*a]\n", "a: &a {<<: *a}\n",
	} {
		f.Add([]byte(s))
	}
	const max = 64 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := yamlToJSON(data, max)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("yamlToJSON(%q) = %q, not valid JSON", data, out)
		}
		if len(out) > max {
			t.Fatalf("yamlToJSON(%q) returned %d bytes, over the limit of %d", data, len(out), max)
		}
	})
}
