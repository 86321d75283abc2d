package vault_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/guard"
)

// seedDetector derives spans from fuzz bytes: each pair of bytes is a start
// (relative to the text) and a length, so spans land anywhere, overlap, cut
// UTF-8 characters and tokens in half.
type seedDetector []byte

func (d seedDetector) Detect(_ context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	n := len(req.Text)
	if n == 0 {
		return nil, nil
	}
	// Types whose values compare exactly: with EMAIL or PHONE, two
	// spellings of one value share a token and come back as the first.
	types := []string{"secret", "LITERAL", "", "x-y"}
	var out []guard.Span
	for i := 0; i+1 < len(d); i += 2 {
		start := int(d[i]) * n / 256
		out = append(out, guard.Span{Start: start, End: start + int(d[i+1]%24), Type: types[int(d[i+1])%len(types)]})
	}
	return out, nil
}

// FuzzTokenizeRoundTrip checks Untokenize(Tokenize(s)) == s within one
// session that keeps growing across inputs (earlier tokens are live,
// earlier token-shaped text is reserved), with spans in arbitrary places.
// (With normalizing types the property holds up to the spelling of values:
// Alice@x and alice@x share a token, which restores the first; the table
// tests cover that. Each byte that is not UTF-8 comes back as U+FFFD.)
func FuzzTokenizeRoundTrip(f *testing.F) {
	f.Add("mail alice@example.com or call (212) 555-0100", []byte{})
	f.Add("[EMAIL_1] says alice@example.com [EMAIL_2] [LITERAL_1]", []byte{10, 5, 12, 30})
	f.Add("é[X_1]ü 4111 1111 1111 1111", []byte{1, 3, 2, 200})
	f.Add("[[EMAIL_1]][PII_1]", []byte{0, 7, 128, 9})
	f.Add("caf\xe9 alice@example.com \xff", []byte{2, 6})
	store := newStore(f, f.TempDir(), nil)
	f.Fuzz(func(t *testing.T, s string, seed []byte) {
		v := open(t, store, "acme", "fuzz", seedDetector(seed))
		tok, err := v.Tokenize(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := v.Untokenize(tok)
		if err != nil {
			t.Fatal(err)
		}
		if want := string([]rune(s)); back != want {
			t.Fatalf("round trip:\n  in  %q\n  tok %q\n  out %q", s, tok, back)
		}
	})
}

// FuzzTokenizeJSON checks that tokenized JSON stays valid and untokenizes
// to the same value (numbers that held a value come back as strings).
func FuzzTokenizeJSON(f *testing.F) {
	f.Add(`{"a": "alice@example.com", "alice@example.com": [4111111111111111, "x\"y"]}`, []byte{})
	f.Add(`["[EMAIL_1]", "\u00e9\\[EMAIL_2]", 1e5, -0.5, true, null]`, []byte{3, 9, 40, 17})
	f.Add(`"\ud83d\ude00 (212) 555-0100"`, []byte{})
	store := newStore(f, f.TempDir(), nil)
	f.Fuzz(func(t *testing.T, s string, seed []byte) {
		if !json.Valid([]byte(s)) {
			return
		}
		v := open(t, store, "acme", "fuzz", seedDetector(seed))
		tok, err := v.TokenizeJSON(t.Context(), json.RawMessage(s))
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(tok) {
			t.Fatalf("TokenizeJSON(%s) = %s, not JSON", s, tok)
		}
		back, err := v.UntokenizeJSON(tok)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqualNumbersAsStrings(t, back, json.RawMessage(s)) {
			t.Fatalf("round trip:\n  in  %s\n  tok %s\n  out %s", s, tok, back)
		}
	})
}

// FuzzUntokenizePython checks that the Python rewriter never fails and
// leaves source without issued tokens byte for byte.
func FuzzUntokenizePython(f *testing.F) {
	f.Add(`x = f"{a!r:>{w}} [EMAIL_1]" + r'\[SECRET_1]' # [EMAIL_1]`)
	f.Add("'''[SECRET_1]\n\\'''\"[PERSON_1]")
	f.Add(`rb"\x[NAME_1]" f'{"[EMAIL_1]"}' u"[EMAIL_2]"`)
	f.Add(`f"{`)
	v := pythonVault(f)
	issued := []string{"[EMAIL_1]", "[SECRET_1]", "[PERSON_1]", "[NAME_1]"}
	f.Fuzz(func(t *testing.T, code string) {
		out, err := v.UntokenizePython(code)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range issued {
			if strings.Contains(code, tok) {
				return
			}
		}
		if out != code {
			t.Fatalf("source without issued tokens changed:\n  in  %q\n  out %q", code, out)
		}
	})
}
