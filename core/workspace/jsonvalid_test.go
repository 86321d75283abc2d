package workspace

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzValidJSON checks validJSON against encoding/json.Valid, which accepts
// the same documents except those with invalid UTF-8.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, ` [1, 2.5e3, "x", null, true] `, `{"a":1,"a":2}`, `{"a":`, `1 2`, `"\ud800"`, "\"\xff\"", ``, `-0`, `01`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := validJSON(data), json.Valid(data)
		if !utf8.Valid(data) {
			if got {
				t.Fatalf("validJSON(%q) accepted invalid UTF-8", data)
			}
			return
		}
		if got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json.Valid = %v", data, got, want)
		}
	})
}
