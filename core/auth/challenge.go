package auth

import (
	"net/http"
	"strings"
)

// challenge is what a 401 or 403 said in its Bearer WWW-Authenticate.
type challenge struct {
	status           int
	resourceMetadata string
	scope            string
	err              string
}

// parseChallenge reads the Bearer challenge of resp (RFC 6750 §3, RFC 9728
// §5.1); other schemes are ignored.
func parseChallenge(resp *http.Response) challenge {
	c := challenge{status: resp.StatusCode}
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		params, ok := bearerParams(h)
		if !ok {
			continue
		}
		c.resourceMetadata = params["resource_metadata"]
		c.scope = params["scope"]
		c.err = params["error"]
		break
	}
	return c
}

// bearerParams parses the auth-params of a Bearer challenge in h.
func bearerParams(h string) (map[string]string, bool) {
	h = strings.TrimSpace(h)
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, false
	}
	params := map[string]string{}
	s := rest
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return params, true
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return params, true
		}
		name := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			val, s = b.String(), s[min(i+1, len(s)):]
		} else {
			end := strings.IndexAny(s, ", \t")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		if _, dup := params[name]; !dup {
			params[name] = val
		}
	}
}
