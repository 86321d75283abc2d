package vault_test

import (
	"encoding/json"
	"testing"
)

// TestSessionIDIsNotTokenized: a session id looks like a secret to the
// entropy detector, but it is the model's own handle on the session.
func TestSessionIDIsNotTokenized(t *testing.T) {
	const id = "20261121T065037Z-fdcad383fe835f75559c6b36cf8c78f6"
	other := "20261121T065037Z-0b1e2c3d4f5a69788796a5b4c3d2e1f0"
	v := open(t, newStore(t, t.TempDir(), nil), "acme", id, piiDetector{})
	for _, tc := range []struct{ in, want string }{
		{"session " + id + " done", "session " + id + " done"},
		{"other session " + other, "other session [SECRET_1]"},
		{id + " mailed alice@example.com", id + " mailed [EMAIL_1]"},
	} {
		if got := tokenize(t, v, tc.in); got != tc.want {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	raw, err := v.TokenizeJSON(t.Context(), json.RawMessage(`{"session":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"session":"` + id + `"}`; string(raw) != want {
		t.Errorf("TokenizeJSON = %s, want %s", raw, want)
	}
}
