package vault_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/cexec/cexec/core/guard/vault"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
)

// TestTokenizeSession runs steps in one session: each input is tokenized,
// compared with the expected output, and untokenized back.
func TestTokenizeSession(t *testing.T) {
	steps := []struct {
		name, in, want string
	}{
		{"email", "mail alice@example.com today", "mail [EMAIL_1] today"},
		{"same value, other case", "cc Alice@Example.COM", "cc [EMAIL_1]"},
		{"second value", "bob@example.org and alice@example.com", "[EMAIL_2] and [EMAIL_1]"},
		{"phone formats share a token", "call (212) 555-0100 or 212.555.0100", "call [PHONE_1] or [PHONE_1]"},
		{"card by digits", "card 4111 1111 1111 1111, again 4111111111111111", "card [CREDIT_CARD_1], again [CREDIT_CARD_1]"},
		{"iban by letters", "iban DE89 3704 0044 0532 0130 00 = DE89370400440532013000", "iban [IBAN_1] = [IBAN_1]"},
		{"ipv6 canonical", "from 2001:db8::1 and 2001:DB8:0::1", "from [IP_ADDRESS_1] and [IP_ADDRESS_1]"},
		{"ssn", "ssn 123-45-6789", "ssn [US_SSN_1]"},
		{"nothing to do", "plain text, no values [x]", "plain text, no values [x]"},
		{"unissued token-shaped text stays", "template [EMAIL_3] and [PHONE_9]", "template [EMAIL_3] and [PHONE_9]"},
		{"a reserved number is skipped", "carol@example.net", "[EMAIL_4]"},
		{"issued token-shaped text becomes a literal", "the doc says [EMAIL_1] verbatim", "the doc says [LITERAL_1] verbatim"},
		{"literal of a literal", "[LITERAL_1] and [LITERAL_1]", "[LITERAL_2] and [LITERAL_2]"},
		{"unicode around values", "→alice@example.com←", "→[EMAIL_1]←"},
		{"empty", "", ""},
	}
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", piiDetector{})
	for _, st := range steps {
		got := tokenize(t, v, st.in)
		if got != st.want {
			t.Errorf("%s: Tokenize(%q) = %q, want %q", st.name, st.in, got, st.want)
		}
		if back := untokenize(t, v, got); back != st.in && !sameValues(back, st.in) {
			t.Errorf("%s: Untokenize(%q) = %q, want %q", st.name, got, back, st.in)
		}
	}
}

// sameValues accepts a round trip that restored the first spelling of a
// value seen earlier in the session (case, phone punctuation).
func sameValues(a, b string) bool {
	norm := strings.NewReplacer("Alice@Example.COM", "alice@example.com", "212.555.0100", "(212) 555-0100",
		"4111111111111111", "4111 1111 1111 1111", "DE89370400440532013000", "DE89 3704 0044 0532 0130 00",
		"2001:DB8:0::1", "2001:db8::1")
	return norm.Replace(a) == norm.Replace(b)
}

func TestUntokenize(t *testing.T) {
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", piiDetector{})
	tokenize(t, v, `alice@example.com bob@example.org "quoted"@example.com`)
	tests := []struct{ in, want string }{
		{"write to [EMAIL_1]", "write to alice@example.com"},
		{"[EMAIL_1][EMAIL_2]", "alice@example.combob@example.org"},
		{"unknown [EMAIL_9] stays", "unknown [EMAIL_9] stays"},
		{"not a token: [EMAIL_01] [EMAIL_] [email_1] [EMAIL_1", "not a token: [EMAIL_01] [EMAIL_] [email_1] [EMAIL_1"},
		{"[[EMAIL_1]]", "[alice@example.com]"},
		{"no brackets at all", "no brackets at all"},
	}
	for _, tt := range tests {
		if got := untokenize(t, v, tt.in); got != tt.want {
			t.Errorf("Untokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSessionsAreIndependent(t *testing.T) {
	s := newStore(t, t.TempDir(), nil)
	det := piiDetector{}
	a := open(t, s, "acme", "a", det)
	b := open(t, s, "acme", "b", det)
	other := open(t, s, "globex", "a", det)
	if got := tokenize(t, a, "alice@example.com"); got != "[EMAIL_1]" {
		t.Fatalf("session a: %q", got)
	}
	if got := tokenize(t, b, "bob@example.org alice@example.com"); got != "[EMAIL_1] [EMAIL_2]" {
		t.Errorf("session b numbers on its own: %q", got)
	}
	if got := untokenize(t, b, "[EMAIL_1]"); got != "bob@example.org" {
		t.Errorf("session b restores its own value: %q", got)
	}
	if got := untokenize(t, other, "[EMAIL_1]"); got != "[EMAIL_1]" {
		t.Errorf("another tenant's session with the same id restored %q", got)
	}
	if a.Len() != 1 || b.Len() != 2 || other.Len() != 0 {
		t.Errorf("Len = %d, %d, %d; want 1, 2, 0", a.Len(), b.Len(), other.Len())
	}
}

func TestSpansFromSeveralGuardsMerge(t *testing.T) {
	text := "id alice@example.com end"
	det := fixedDetector{
		{Start: 3, End: 20, Type: "EMAIL"},
		{Start: 9, End: 24, Type: "secret"}, // shorter, overlaps and runs past the email
		{Start: 100, End: 120, Type: "EMAIL"},
	}
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", det)
	got := tokenize(t, v, text)
	if got != "id [EMAIL_1]" {
		t.Errorf("Tokenize = %q, want the union of both spans, typed after the longer", got)
	}
	if back := untokenize(t, v, got); back != text {
		t.Errorf("round trip = %q", back)
	}
}

// TestDetectedLiteralType: a detector type that happens to be LITERAL is a
// value like any other, never mistaken for token-shaped text.
func TestDetectedLiteralType(t *testing.T) {
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", fixedDetector{{Start: 0, End: 9, Type: "literal"}})
	if got := tokenize(t, v, "]][PII_1]x"); got != "[LITERAL_1]x" {
		t.Errorf("Tokenize = %q", got)
	}
}

func TestSpansAreWidenedToCharacters(t *testing.T) {
	text := "x é y" // é is 2 bytes at 2..4
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", fixedDetector{{Start: 3, End: 4, Type: "X"}})
	if got := tokenize(t, v, text); got != "x [X_1] y" {
		t.Errorf("Tokenize = %q", got)
	}
}

func TestTokenTypes(t *testing.T) {
	tests := []struct{ typ, want string }{
		{"email", "[EMAIL_1]"},
		{"us-ssn", "[US_SSN_1]"},
		{"2fa code", "[PII_2FA_CODE_1]"},
		{"", "[PII_1]"},
		{strings.Repeat("LONG", 20), "[" + strings.Repeat("LONG", 8) + "_1]"},
	}
	for _, tt := range tests {
		v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", fixedDetector{{Start: 0, End: 5, Type: tt.typ}})
		got := tokenize(t, v, "value")
		if got != tt.want {
			t.Errorf("type %q: %q, want %q", tt.typ, got, tt.want)
		}
		if back := untokenize(t, v, got); back != "value" {
			t.Errorf("type %q: round trip %q", tt.typ, back)
		}
	}
}

func TestDetectorErrorFailsClosed(t *testing.T) {
	det := &failingDetector{}
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", det)
	out, err := v.Tokenize(t.Context(), "alice@example.com")
	if !errors.Is(err, errDetect) || out != "" {
		t.Errorf("Tokenize = %q, %v; want no text and the detector's error", out, err)
	}
	if _, err := v.TokenizeJSON(t.Context(), json.RawMessage(`{"a":"b"}`)); !errors.Is(err, errDetect) {
		t.Errorf("TokenizeJSON error = %v", err)
	}
	if det.calls.Load() != 2 {
		t.Errorf("detector calls = %d, want 2", det.calls.Load())
	}
}

func TestNilDetectorStillProtectsTokens(t *testing.T) {
	s := newStore(t, t.TempDir(), nil)
	withDet := open(t, s, "acme", "s1", piiDetector{})
	plain := open(t, s, "acme", "s1", nil)
	tokenize(t, withDet, "alice@example.com")
	if got := tokenize(t, plain, "bob@example.org says [EMAIL_1]"); got != "bob@example.org says [LITERAL_1]" {
		t.Errorf("Tokenize without a detector = %q", got)
	}
}

func TestMaxEntries(t *testing.T) {
	s, err := vault.NewStore(vault.Options{DataDir: t.TempDir(), MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := open(t, s, "acme", "s1", piiDetector{})
	tokenize(t, v, "a@example.com b@example.com a@example.com")
	out, err := v.Tokenize(t.Context(), "a@example.com c@example.com")
	if !errors.Is(err, pluginapi.ErrResourceExhausted) || out != "" || !strings.Contains(err.Error(), "start a new session") {
		t.Errorf("third value: %q, %v; want ErrResourceExhausted saying to start a new session", out, err)
	}
	if got := tokenize(t, v, "b@example.com"); got != "[EMAIL_2]" {
		t.Errorf("known values still tokenize: %q", got)
	}
	// Reservations count too: token-shaped text cannot grow a vault
	// without bound either.
	if out, err := v.Tokenize(t.Context(), "[EMAIL_7]"); !errors.Is(err, pluginapi.ErrResourceExhausted) || out != "" {
		t.Errorf("reservation past the limit: %q, %v", out, err)
	}
}

func TestClosed(t *testing.T) {
	s := newStore(t, t.TempDir(), nil)
	v, err := s.Open("acme", "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	calls := map[string]func() error{
		"Tokenize":         func() error { _, err := v.Tokenize(t.Context(), "x"); return err },
		"TokenizeJSON":     func() error { _, err := v.TokenizeJSON(t.Context(), json.RawMessage(`1`)); return err },
		"Untokenize":       func() error { _, err := v.Untokenize("x"); return err },
		"UntokenizeJSON":   func() error { _, err := v.UntokenizeJSON(json.RawMessage(`1`)); return err },
		"UntokenizePython": func() error { _, err := v.UntokenizePython("x"); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, vault.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestInvalidIDs(t *testing.T) {
	s := newStore(t, t.TempDir(), nil)
	for _, ids := range [][2]string{{"Acme", "s"}, {"../x", "s"}, {"acme", "../s"}, {"acme", "a/b"}, {"acme", ""}, {"acme", "x..y"}} {
		if _, err := s.Open(ids[0], ids[1], nil); !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("Open(%q, %q) = %v, want ErrInvalidArgument", ids[0], ids[1], err)
		}
		if err := s.Delete(ids[0], ids[1]); !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("Delete(%q, %q) = %v, want ErrInvalidArgument", ids[0], ids[1], err)
		}
	}
	if _, err := vault.NewStore(vault.Options{DataDir: "relative"}); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("NewStore with a relative data_dir = %v", err)
	}
}

// TestConcurrentHandles tokenizes overlapping values from many handles of
// one session at once: every value must end up with exactly one token.
func TestConcurrentHandles(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, nil)
	det := piiDetector{}
	const workers, values = 8, 40
	results := make([]map[string]string, workers) // value → token
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			v, err := s.Open("acme", "shared", det)
			if err != nil {
				t.Error(err)
				return
			}
			defer v.Close()
			results[w] = map[string]string{}
			for i := range values {
				val := fmt.Sprintf("user%d@example.com", (i*7+w)%values)
				out, err := v.Tokenize(t.Context(), "to "+val)
				if err != nil {
					t.Error(err)
					return
				}
				results[w][val] = strings.TrimPrefix(out, "to ")
			}
		})
	}
	wg.Wait()
	byToken := map[string]string{}
	for w, r := range results {
		for val, tok := range r {
			if prev, ok := byToken[tok]; ok && prev != val {
				t.Fatalf("token %s stands for %s and %s", tok, prev, val)
			}
			byToken[tok] = val
			if other := results[0][val]; other != tok {
				t.Errorf("worker %d got %s for %s, worker 0 got %s", w, tok, val, other)
			}
		}
	}
	if len(byToken) != values {
		t.Errorf("%d tokens for %d values", len(byToken), values)
	}
	// Everything was saved: a fresh store (a restarted daemon) agrees.
	v := open(t, newStore(t, dir, nil), "acme", "shared", nil)
	for tok, val := range byToken {
		if got := untokenize(t, v, tok); got != val {
			t.Errorf("after reopen %s = %q, want %q", tok, got, val)
		}
	}
}

func TestTokenizeJSON(t *testing.T) {
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", piiDetector{})
	tests := []struct {
		name, in, want string
	}{
		{"values and keys, layout kept",
			"{\n  \"alice@example.com\": {\"phone\": \"(212) 555-0100\", \"n\": 1.5e3},\n  \"list\": [\"x\", \"bob@example.org\", true, null]\n}",
			"{\n  \"[EMAIL_1]\": {\"phone\": \"[PHONE_1]\", \"n\": 1.5e3},\n  \"list\": [\"x\", \"[EMAIL_2]\", true, null]\n}"},
		{"escaped strings", `{"note":"mail \"alice@example.com\"\n<b>"}`, `{"note":"mail \"[EMAIL_1]\"\n<b>"}`},
		{"a card written as a number", `{"card": 4111111111111111, "qty": 3}`, `{"card": "[CREDIT_CARD_1]", "qty": 3}`},
		{"scalar string", `"alice@example.com"`, `"[EMAIL_1]"`},
		{"nothing to do", `{"a": [1, 2, {"b": "c"}]}`, `{"a": [1, 2, {"b": "c"}]}`},
		{"unissued token text", `["[EMAIL_7]"]`, `["[EMAIL_7]"]`},
		{"issued token text", `["[EMAIL_1]"]`, `["[LITERAL_1]"]`},
	}
	for _, tt := range tests {
		got, err := v.TokenizeJSON(t.Context(), json.RawMessage(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
		back, err := v.UntokenizeJSON(got)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqualNumbersAsStrings(t, back, json.RawMessage(tt.in)) {
			t.Errorf("%s: UntokenizeJSON = %s, want %s", tt.name, back, tt.in)
		}
	}
	for _, bad := range []string{`{"a":`, ``, `{"a":"b"} x`} {
		if _, err := v.TokenizeJSON(t.Context(), json.RawMessage(bad)); !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("TokenizeJSON(%q) = %v, want ErrInvalidArgument", bad, err)
		}
		if _, err := v.UntokenizeJSON(json.RawMessage(bad)); !errors.Is(err, pluginapi.ErrInvalidArgument) {
			t.Errorf("UntokenizeJSON(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestUntokenizeJSON(t *testing.T) {
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", piiDetector{})
	tokenize(t, v, `alice@example.com say "hi"\now`)
	in := `{"path": "/data/out/[EMAIL_1].txt", "[EMAIL_1]": ["[EMAIL_2]", 7], "content": "Dear [EMAIL_1]"}`
	got, err := v.UntokenizeJSON(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"path": "/data/out/alice@example.com.txt", "alice@example.com": ["[EMAIL_2]", 7], "content": "Dear alice@example.com"}`
	if string(got) != want {
		t.Errorf("UntokenizeJSON:\n got %s\nwant %s", got, want)
	}
	// Values that need escaping in JSON come out escaped.
	s := newStore(t, t.TempDir(), nil)
	w := open(t, s, "acme", "s1", fixedDetector{{Start: 0, End: 12, Type: "SECRET"}})
	tok := tokenize(t, w, "a\"b\\c\nd\te\u2028f")
	got, err = w.UntokenizeJSON(json.RawMessage(`{"k":"` + tok + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if m["k"] != "a\"b\\c\nd\te\u2028f" {
		t.Errorf("restored %q from %s", m["k"], got)
	}
}

// jsonEqualNumbersAsStrings compares two JSON values, treating a number
// and a string with the same text as equal (TokenizeJSON turns numbers
// holding values into strings).
func jsonEqualNumbersAsStrings(t testing.TB, a, b json.RawMessage) bool {
	t.Helper()
	return reflect.DeepEqual(decodeLoose(t, a), decodeLoose(t, b))
}

func decodeLoose(t testing.TB, raw json.RawMessage) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			return string(x)
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

// countingDetector counts calls to the detector.
type countingDetector struct {
	piiDetector
	calls atomic.Int32
}

func (c *countingDetector) Detect(ctx context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	c.calls.Add(1)
	return c.piiDetector.Detect(ctx, req)
}

// TestTokenizeTextJSON: a reply's text and JSON value are tokenized with one
// detection, sharing tokens, exactly as Tokenize and TokenizeJSON would.
func TestTokenizeTextJSON(t *testing.T) {
	det := &countingDetector{piiDetector: piiDetector{}}
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", det)
	text, raw, err := v.TokenizeTextJSON(t.Context(), "mail alice@example.com",
		json.RawMessage(`{"to":"alice@example.com","cc":["bob@example.org"],"n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if text != "mail [EMAIL_1]" || string(raw) != `{"to":"[EMAIL_1]","cc":["[EMAIL_2]"],"n":3}` {
		t.Errorf("TokenizeTextJSON = %q, %s", text, raw)
	}
	if n := det.calls.Load(); n != 1 {
		t.Errorf("%d detections, want 1", n)
	}
	if _, _, err := v.TokenizeTextJSON(t.Context(), "x", json.RawMessage(`{"a":`)); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("invalid JSON: %v, want ErrInvalidArgument", err)
	}
	if text, raw, err := v.TokenizeTextJSON(t.Context(), "no values", json.RawMessage(`[1,2]`)); err != nil || text != "no values" || string(raw) != `[1,2]` {
		t.Errorf("nothing to do = %q, %s, %v", text, raw, err)
	}
}

// utf8Detector is piiDetector behind the check a gRPC detector makes: its
// request is a protobuf string, which must be UTF-8.
type utf8Detector struct{ piiDetector }

func (d utf8Detector) Detect(ctx context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	if !utf8.ValidString(req.Text) {
		return nil, errors.New("grpc: error while marshaling: string field contains invalid UTF-8")
	}
	return d.piiDetector.Detect(ctx, req)
}

// TestInvalidUTF8 tokenizes output that is not UTF-8 (a program printing
// Latin-1): the bad bytes become U+FFFD and the values around them are
// still found, rather than the detector failing and all output being
// withheld.
func TestInvalidUTF8(t *testing.T) {
	v := open(t, newStore(t, t.TempDir(), nil), "acme", "s1", utf8Detector{})
	texts, raw, err := v.TokenizeTexts(t.Context(), []string{"caf\xe9 alice@example.com", "ok", "\xff"}, json.RawMessage(`{"k":"bob@example.org"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"caf\uFFFD [EMAIL_1]", "ok", "\uFFFD"}
	if !slices.Equal(texts, want) {
		t.Errorf("texts = %q, want %q", texts, want)
	}
	if string(raw) != `{"k":"[EMAIL_2]"}` {
		t.Errorf("json = %s", raw)
	}
}
