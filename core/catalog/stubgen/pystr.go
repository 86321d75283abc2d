package stubgen

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyString renders s as a double-quoted Python string literal. Printable non-ASCII text (the
// Chinese descriptions, say) stays readable; everything Python would misread is escaped.
func pyString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			i += writeRune(&b, s[i:])
			continue
		}
		i++
	}
	b.WriteByte('"')
	return b.String()
}

// writeRune writes the first rune of s, escaped when it is not printable (control
// characters, line and paragraph separators, NUL which Python source may not contain), and
// returns its length in s.
func writeRune(b *strings.Builder, s string) int {
	if c := s[0]; c >= 0x20 && c < 0x7f {
		b.WriteByte(c)
		return 1
	}
	r, n := utf8.DecodeRuneInString(s)
	switch {
	case unicode.IsPrint(r):
		b.WriteRune(r) // U+FFFD for a byte that is not UTF-8
	case r < 0x100:
		fmt.Fprintf(b, `\x%02x`, r)
	case r < 0x10000:
		fmt.Fprintf(b, `\u%04x`, r)
	default:
		fmt.Fprintf(b, `\U%08x`, r)
	}
	return n
}

// normalizeText makes upstream prose safe to lay out line by line: CRLF and CR become LF,
// trailing spaces go, and leading and trailing blank lines are dropped.
func normalizeText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRightFunc(l, unicode.IsSpace)
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// docstring writes text as a triple-quoted docstring indented by indent. Backslashes are
// doubled and a quote is escaped only where it would end the string (before another quote or
// at the very end), so descriptions stay readable in the stub source agents are shown.
func docstring(b *strings.Builder, indent, text string) {
	text = normalizeText(text)
	b.Grow(len(text) + len(text)/16 + 16)
	b.WriteString(indent)
	b.WriteString(`"""`)
	for i := 0; i < len(text); {
		switch c := text[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '"' && (i+1 == len(text) || text[i+1] == '"'):
			b.WriteString(`\"`)
		case c == '\n':
			b.WriteByte('\n')
			if i+1 < len(text) && text[i+1] != '\n' {
				b.WriteString(indent)
			}
		case c == '\t':
			b.WriteByte('\t')
		default:
			i += writeRune(b, text[i:])
			continue
		}
		i++
	}
	if strings.Contains(text, "\n") {
		b.WriteByte('\n')
		b.WriteString(indent)
	}
	b.WriteString("\"\"\"\n")
}

// comment writes text as "#:" comment lines (the attribute-doc style Sphinx reads). The colon
// also keeps a description such as "type: ignore" from becoming a type comment mypy obeys.
func comment(b *strings.Builder, indent, text string) {
	for _, line := range strings.Split(normalizeText(text), "\n") {
		b.WriteString(indent)
		b.WriteString("#:")
		if line != "" {
			b.WriteByte(' ')
			for _, r := range line {
				if r == '\t' || unicode.IsPrint(r) {
					b.WriteRune(r)
				} else {
					b.WriteByte(' ')
				}
			}
		}
		b.WriteByte('\n')
	}
}
