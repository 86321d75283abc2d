package config

import (
	"encoding/json"
	"strings"
)

// SecretMask replaces secrets (Config.Secrets) with "(sensitive)", as
// `cexecctl config show` shows them, in what processes given them send
// back: an upstream server's results and errors, a plugin's log lines. A
// nil mask masks nothing.
type SecretMask struct {
	text *strings.Replacer // as they are
	json *strings.Replacer // inside JSON strings, escaped as JSON escapes them
}

// NewSecretMask is the mask of secrets; nil when there are none.
func NewSecretMask(secrets []string) *SecretMask {
	if len(secrets) == 0 {
		return nil
	}
	var text, js []string
	for _, s := range secrets {
		text = append(text, s, maskedValue)
		b, _ := json.Marshal(s)
		js = append(js, string(b[1:len(b)-1]), maskedValue)
	}
	return &SecretMask{text: strings.NewReplacer(text...), json: strings.NewReplacer(js...)}
}

// Replace masks s, and the secrets' JSON-escaped forms in it too: a text
// is often JSON.
func (m *SecretMask) Replace(s string) string {
	if m == nil {
		return s
	}
	return m.json.Replace(m.text.Replace(s))
}

// ReplaceJSON masks the strings of a JSON document.
func (m *SecretMask) ReplaceJSON(b []byte) []byte {
	if m == nil || len(b) == 0 {
		return b
	}
	return []byte(m.json.Replace(string(b)))
}
