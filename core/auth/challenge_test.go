package auth

import (
	"net/http"
	"testing"
)

func TestParseChallenge(t *testing.T) {
	for _, tt := range []struct {
		headers []string
		want    challenge
	}{
		{[]string{`Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="read write"`},
			challenge{resourceMetadata: "https://a.example/.well-known/oauth-protected-resource/mcp", scope: "read write"}},
		{[]string{`Bearer error="insufficient_scope", scope="mcp:admin", error_description="a \"quoted\" word"`},
			challenge{err: "insufficient_scope", scope: "mcp:admin"}},
		{[]string{`Basic realm="x"`, `Bearer scope=files`}, challenge{scope: "files"}},
		{[]string{`Basic realm="x"`}, challenge{}},
	} {
		resp := &http.Response{StatusCode: 401, Header: http.Header{"Www-Authenticate": tt.headers}}
		got := parseChallenge(resp)
		tt.want.status = 401
		if got != tt.want {
			t.Errorf("%q: got %+v, want %+v", tt.headers, got, tt.want)
		}
	}
}
