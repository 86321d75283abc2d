package vault

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cexec/cexec/pluginapi"
)

// Untokenize replaces every token the vault issued with its value. Text
// that only looks like a token is left as it is, so "[EMAIL_1]" written
// by someone else stays "[EMAIL_1]" unless this session issued it.
func (v *Vault) Untokenize(text string) (string, error) {
	if err := v.check(); err != nil {
		return "", err
	}
	if strings.IndexByte(text, '[') < 0 {
		return text, nil
	}
	v.st.mu.RLock()
	defer v.st.mu.RUnlock()
	return v.st.untokenize(text), nil
}

// untokenize is Untokenize with st.mu held.
func (st *state) untokenize(s string) string {
	var b strings.Builder
	last := 0
	forEachToken(s, func(start, end int) {
		val, ok := st.lookup(s[start:end])
		if !ok {
			return
		}
		if last == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:start])
		b.WriteString(val)
		last = end
	})
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// TokenizeJSON tokenizes every string in a JSON value, object keys
// included, with one detector call for the whole value. A number whose
// text contains a detected value (a card number written as a number)
// becomes a string holding its tokenized text. Everything else, layout and
// key order included, is kept byte for byte.
func (v *Vault) TokenizeJSON(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("vault: tokenize: not a valid JSON value: %w", pluginapi.ErrInvalidArgument)
	}
	items := scanJSON(raw, true)
	if len(items) == 0 {
		return raw, nil
	}
	segs := make([]string, len(items))
	for i, it := range items {
		segs[i] = it.text
	}
	out, err := v.tokenize(ctx, segs)
	if err != nil {
		return nil, err
	}
	return rebuildJSON(raw, items, segs, out), nil
}

// TokenizeTextJSON is Tokenize of text and TokenizeJSON of raw in one pass:
// one detection for both (one round trip to the guard plugins, not two).
func (v *Vault) TokenizeTextJSON(ctx context.Context, text string, raw json.RawMessage) (string, json.RawMessage, error) {
	if len(raw) == 0 {
		return "", nil, fmt.Errorf("vault: tokenize: not a valid JSON value: %w", pluginapi.ErrInvalidArgument)
	}
	texts, raw, err := v.TokenizeTexts(ctx, []string{text}, raw)
	if err != nil {
		return "", nil, err
	}
	return texts[0], raw, nil
}

// TokenizeTexts is Tokenize of each text and TokenizeJSON of raw (when
// not empty) with one detection for all of them.
func (v *Vault) TokenizeTexts(ctx context.Context, texts []string, raw json.RawMessage) ([]string, json.RawMessage, error) {
	if err := v.check(); err != nil {
		return nil, nil, err
	}
	var items []jsonItem
	if len(raw) > 0 {
		if !json.Valid(raw) {
			return nil, nil, fmt.Errorf("vault: tokenize: not a valid JSON value: %w", pluginapi.ErrInvalidArgument)
		}
		items = scanJSON(raw, true)
	}
	segs := make([]string, len(texts), len(texts)+len(items))
	copy(segs, texts)
	for _, it := range items {
		segs = append(segs, it.text)
	}
	out, err := v.tokenize(ctx, segs)
	if err != nil {
		return nil, nil, err
	}
	if len(items) == 0 {
		return out[:len(texts)], raw, nil
	}
	n := len(texts)
	return out[:n], rebuildJSON(raw, items, segs[n:], out[n:]), nil
}

// UntokenizeJSON untokenizes every string in a JSON value, object keys
// included, keeping everything else byte for byte. A token that stood for
// a number comes back as a string.
func (v *Vault) UntokenizeJSON(raw json.RawMessage) (json.RawMessage, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("vault: untokenize: not a valid JSON value: %w", pluginapi.ErrInvalidArgument)
	}
	if !strings.Contains(string(raw), "[") {
		return raw, nil
	}
	items := scanJSON(raw, false)
	segs := make([]string, len(items))
	out := make([]string, len(items))
	v.st.mu.RLock()
	for i, it := range items {
		segs[i] = it.text
		out[i] = it.text
		if strings.IndexByte(it.text, '[') >= 0 {
			out[i] = v.st.untokenize(it.text)
		}
	}
	v.st.mu.RUnlock()
	return rebuildJSON(raw, items, segs, out), nil
}

// UntokenizePython restores tokens inside the string literals of Python
// source, so code the agent writes with tokens runs with the real values.
// Each value is written escaped for the literal it lands in (quotes,
// backslashes, newlines, braces of f-strings, non-ASCII in bytes); a raw
// literal holding a token is rewritten as the equivalent non-raw literal,
// because a raw literal cannot hold every value. Tokens outside string
// literals (in code or comments) are left alone: there they are not data,
// and pasting a value into code would change what the code does.
func (v *Vault) UntokenizePython(code string) (string, error) {
	if err := v.check(); err != nil {
		return "", err
	}
	if strings.IndexByte(code, '[') < 0 {
		return code, nil
	}
	v.st.mu.RLock()
	defer v.st.mu.RUnlock()
	return untokenizePython(code, v.st.lookup), nil
}
