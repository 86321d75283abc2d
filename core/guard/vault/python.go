package vault

import (
	"strings"
	"unicode/utf8"
)

// pyRewriter restores tokens inside the string literals of Python source.
// It is a lexer for the parts of Python's grammar that decide what is a
// string literal: comments, string prefixes, single and triple quotes,
// escapes, and f-string replacement fields (whose expressions are code
// again, with string literals of their own). It never fails: on source
// that is not valid Python it still returns text, which Python will then
// reject as it would have rejected the original.
type pyRewriter struct {
	src    string
	lookup func(tok string) (string, bool)
	out    []byte
}

func untokenizePython(src string, lookup func(string) (string, bool)) string {
	w := &pyRewriter{src: src, lookup: lookup, out: make([]byte, 0, len(src)+64)}
	w.code(0, false, true)
	return string(w.out)
}

// code copies code from i. In a replacement field (field set) it stops,
// without consuming it, at a '}', ':' or '!' (not "!=") outside brackets;
// otherwise it runs to the end. Comments are skipped over when comments is
// set (inside a single-line f-string a '#' is not a comment).
func (w *pyRewriter) code(i int, field, comments bool) int {
	src, depth := w.src, 0
	for i < len(src) {
		c := src[i]
		switch {
		case field && depth == 0 && (c == '}' || c == ':' || c == '!' && !(i+1 < len(src) && src[i+1] == '=')):
			return i
		case c == '#' && comments:
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			w.out = append(w.out, src[i:i+j]...)
			i += j
		case c == '(' || c == '[' || c == '{':
			depth++
			w.out = append(w.out, c)
			i++
		case c == ')' || c == ']' || c == '}':
			depth = max(depth-1, 0)
			w.out = append(w.out, c)
			i++
		case c == '\'' || c == '"':
			i = w.str(i, "")
		case isIdentByte(c):
			j := i + 1
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			if j < len(src) && (src[j] == '\'' || src[j] == '"') && isStringPrefix(src[i:j]) {
				i = w.str(j, src[i:j])
			} else {
				w.out = append(w.out, src[i:j]...)
				i = j
			}
		default:
			w.out = append(w.out, c)
			i++
		}
	}
	return i
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= utf8.RuneSelf
}

// isStringPrefix reports whether p is a string prefix: r, u, b, f, t
// (template strings, Python 3.14) and the raw combinations, any case.
func isStringPrefix(p string) bool {
	switch strings.ToLower(p) {
	case "r", "u", "b", "f", "t", "br", "rb", "fr", "rf", "tr", "rt":
		return true
	}
	return false
}

// literal describes the string literal being rewritten.
type literal struct {
	q                  byte // quote character
	triple             bool
	raw, bytes, fmt    bool
	convert            bool // rewriting a raw literal as a non-raw one
	needConvert        bool // a raw literal holds a token
	afterLoneBackslash bool // the last thing written was an invalid escape's backslash
}

// str rewrites the string literal whose opening quote is at i and whose
// prefix (already read, not yet written) is prefix. It returns the index
// after the literal.
func (w *pyRewriter) str(i int, prefix string) int {
	lp := strings.ToLower(prefix)
	l := literal{
		q:      w.src[i],
		triple: i+2 < len(w.src) && w.src[i+1] == w.src[i] && w.src[i+2] == w.src[i],
		raw:    strings.Contains(lp, "r"),
		bytes:  strings.Contains(lp, "b"),
		fmt:    strings.ContainsAny(lp, "ft"),
	}
	mark := len(w.out)
	end := w.lit(i, prefix, &l)
	if l.needConvert {
		w.out = w.out[:mark]
		l = literal{q: l.q, triple: l.triple, raw: true, bytes: l.bytes, fmt: l.fmt, convert: true}
		end = w.lit(i, prefix, &l)
	}
	return end
}

// lit writes one string literal: prefix, quotes and content.
func (w *pyRewriter) lit(i int, prefix string, l *literal) int {
	src := w.src
	if l.convert {
		prefix = strings.NewReplacer("r", "", "R", "").Replace(prefix)
	}
	w.out = append(w.out, prefix...)
	qlen := 1
	if l.triple {
		qlen = 3
	}
	w.out = append(w.out, src[i:i+qlen]...)
	j := w.content(i+qlen, l, false)
	if j < len(src) && w.closes(j, l) {
		w.out = append(w.out, src[j:j+qlen]...)
		j += qlen
	}
	return j
}

// closes reports whether the literal's closing quote starts at j.
func (w *pyRewriter) closes(j int, l *literal) bool {
	src := w.src
	if src[j] != l.q {
		return false
	}
	return !l.triple || j+2 < len(src) && src[j+1] == l.q && src[j+2] == l.q
}

// content rewrites literal text from j up to the closing quote (or, in a
// format spec, up to the '}' that ends it) and returns where it stopped.
func (w *pyRewriter) content(j int, l *literal, spec bool) int {
	src := w.src
	for j < len(src) {
		c := src[j]
		lone := l.afterLoneBackslash
		l.afterLoneBackslash = false
		switch {
		case w.closes(j, l):
			return j
		case c == '\n' && !l.triple:
			return j // unterminated; Python reports it
		case spec && c == '}':
			return j
		case c == '\\':
			j = w.backslash(j, l)
		case l.fmt && (c == '{' || c == '}') && j+1 < len(src) && src[j+1] == c && !spec:
			w.out = append(w.out, c, c)
			j += 2
		case l.fmt && c == '{':
			j = w.field(j, l)
		case c == '[' && !spec:
			end, ok := tokenAt(src, j)
			val, known := "", false
			if ok {
				val, known = w.lookup(src[j:end])
			}
			switch {
			case !known:
				w.litByte(c, l)
				j++
			case l.raw && !l.convert:
				l.needConvert = true
				w.out = append(w.out, c)
				j++
			default:
				if lone {
					// "\[EMAIL_1]" holds a backslash: keep it one when
					// the value starts with a letter an escape would eat.
					w.out = append(w.out, '\\')
				}
				w.value(val, l)
				j = end
			}
		default:
			w.litByte(c, l)
			j++
		}
	}
	return j
}

// backslash handles a backslash in literal text at j.
func (w *pyRewriter) backslash(j int, l *literal) int {
	src := w.src
	next := byte(0)
	if j+1 < len(src) {
		next = src[j+1]
	}
	if l.raw {
		// In a raw literal a backslash keeps the next character, and only
		// matters for a quote, a backslash or a line end, which it stops
		// from ending the literal.
		if next == l.q || next == '\\' || next == '\n' || next == '\r' {
			w.litByte('\\', l)
			w.litByte(next, l)
			return j + 2
		}
		w.litByte('\\', l)
		return j + 1
	}
	switch {
	case next == '\r' && j+2 < len(src) && src[j+2] == '\n':
		w.out = append(w.out, src[j:j+3]...)
		return j + 3
	case next != 0 && strings.IndexByte("\n\r\\'\"abfnrtv01234567xNuU", next) >= 0:
		w.out = append(w.out, '\\', next)
		return j + 2
	}
	// An invalid escape keeps its backslash; Python warns about it.
	w.out = append(w.out, '\\')
	l.afterLoneBackslash = true
	return j + 1
}

// field rewrites an f-string replacement field starting with '{' at j:
// the expression, an optional !conversion, an optional :format_spec.
func (w *pyRewriter) field(j int, l *literal) int {
	src := w.src
	w.out = append(w.out, '{')
	j = w.code(j+1, true, l.triple)
	if j < len(src) && src[j] == '!' {
		k := j + 1
		for k < len(src) && isIdentByte(src[k]) {
			k++
		}
		w.out = append(w.out, src[j:k]...)
		j = k
	}
	if j < len(src) && src[j] == ':' {
		w.out = append(w.out, ':')
		j = w.content(j+1, l, true)
	}
	if j < len(src) && src[j] == '}' {
		w.out = append(w.out, '}')
		j++
	}
	return j
}

// litByte writes one byte of literal text, escaped when a raw literal is
// being rewritten as a non-raw one.
func (w *pyRewriter) litByte(c byte, l *literal) {
	if !l.convert {
		w.out = append(w.out, c)
		return
	}
	switch {
	case c == '\\' || c == l.q:
		w.out = append(w.out, '\\', c)
	case c == '\n' && !l.triple:
		w.out = append(w.out, '\\', 'n')
	case c == '\r':
		w.out = append(w.out, '\\', 'r')
	default:
		w.out = append(w.out, c)
	}
}

// value writes a restored value escaped for the literal.
func (w *pyRewriter) value(v string, l *literal) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '\\' || c == l.q:
			w.out = append(w.out, '\\', c)
		case c == '\n':
			w.out = append(w.out, '\\', 'n')
		case c == '\r':
			w.out = append(w.out, '\\', 'r')
		case c == '\t':
			w.out = append(w.out, '\\', 't')
		case c < 0x20 || c == 0x7f || c >= utf8.RuneSelf && l.bytes:
			w.out = append(w.out, '\\', 'x', hex[c>>4], hex[c&0xf])
		case l.fmt && (c == '{' || c == '}'):
			w.out = append(w.out, c, c)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(v[i:])
			if r == utf8.RuneError && size == 1 {
				w.out = append(w.out, `\ufffd`...)
			} else {
				w.out = append(w.out, v[i:i+size]...)
			}
			i += size
			continue
		default:
			w.out = append(w.out, c)
		}
		i++
	}
}
