package mcpface

import "testing"

func TestSplitSecret(t *testing.T) {
	for _, tc := range []struct{ name, ask, plain, secret string }{
		{"no secret", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"writeOnly", `{"type":"object","properties":{"a":{"type":"string"},"k":{"type":"string","writeOnly":true}},"required":["a","k"]}`,
			`{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"}`,
			`{"properties":{"k":{"type":"string","writeOnly":true}},"required":["k"],"type":"object"}`},
		{"password only", `{"type":"object","properties":{"k":{"type":"string","format":"password"}}}`, "",
			`{"properties":{"k":{"format":"password","type":"string"}},"type":"object"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, secret, err := splitSecret([]byte(tc.ask))
			if err != nil {
				t.Fatal(err)
			}
			if string(plain) != tc.plain || string(secret) != tc.secret {
				t.Errorf("plain %s secret %s\nwant %s and %s", plain, secret, tc.plain, tc.secret)
			}
		})
	}
}
