package vault

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonItem is a string or number literal of a JSON text: its bytes
// raw[start:end] and the text it stands for.
type jsonItem struct {
	start, end int
	text       string
	number     bool
}

// scanJSON lists the string literals of a valid JSON text, and its number
// literals too when numbers is set.
func scanJSON(raw []byte, numbers bool) []jsonItem {
	var items []jsonItem
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			j, escaped := i+1, false
			for raw[j] != '"' {
				if raw[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			it := jsonItem{start: i, end: j + 1}
			if escaped {
				it.text = unescapeJSON(raw[i+1 : j])
			} else {
				it.text = string(raw[i+1 : j])
			}
			items = append(items, it)
			i = j + 1
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			if numbers {
				items = append(items, jsonItem{start: i, end: j, text: string(raw[i:j]), number: true})
			}
			i = j
		default:
			i++
		}
	}
	return items
}

// unescapeJSON decodes the inside of a valid JSON string literal as
// encoding/json does (a lone surrogate becomes U+FFFD), without its
// reflection and allocation costs.
func unescapeJSON(s []byte) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2 = hex4(s[i+3 : i+7])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, s[i])
		}
	}
	return string(b)
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// rebuildJSON copies raw, writing items whose text changed from before to
// after as JSON strings.
func rebuildJSON(raw []byte, items []jsonItem, before, after []string) json.RawMessage {
	var out []byte
	last := 0
	for i, it := range items {
		if after[i] == before[i] {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(raw)+len(raw)/8)
		}
		out = append(out, raw[last:it.start]...)
		out = appendJSONString(out, after[i])
		last = it.end
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// appendJSONString appends s as a JSON string. Unlike encoding/json it
// leaves <, > and & alone: the output is read by a model, not embedded in
// HTML.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, `\u00`...)
				b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, `\u`...)
			b = strconv.AppendInt(b, int64(r), 16)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
