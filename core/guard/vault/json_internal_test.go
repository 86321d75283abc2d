package vault

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzUnescapeJSON holds unescapeJSON to encoding/json's decoding of every
// valid JSON string literal.
func FuzzUnescapeJSON(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\uD83D\uDE00"`, `"\ud83d\ud83d\ude00"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		var want string
		// encoding/json also replaces invalid UTF-8 with U+FFFD; the
		// scanner keeps the bytes (the detector sees them as they are).
		if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' || !utf8.ValidString(lit) ||
			json.Unmarshal([]byte(lit), &want) != nil {
			return
		}
		if got := unescapeJSON([]byte(lit[1 : len(lit)-1])); got != want {
			t.Errorf("unescapeJSON(%s) = %q, encoding/json says %q", lit, got, want)
		}
	})
}
