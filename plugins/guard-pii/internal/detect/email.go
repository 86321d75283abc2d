package detect

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Email length limits from RFC 5321.
const (
	maxLocalPart = 64
	maxDomain    = 253
	maxLabel     = 63
)

// findEmails finds addresses of the common shape local@domain.tld: the local
// part from [A-Za-z0-9._%+'-] (not starting or ending with a dot, no two dots
// in a row), a domain of at least two dot-separated labels, and an
// alphabetic top-level label. Quoted local parts and IP-literal domains are
// left out: they are rare in text and cost precision.
func findEmails(text string, out []Span) []Span {
	for pos := 0; ; {
		at := strings.IndexByte(text[pos:], '@')
		if at < 0 {
			return out
		}
		at += pos
		pos = at + 1
		start := at
		for start > 0 && at-start < maxLocalPart {
			if is(text[start-1], cLocal) {
				start--
				continue
			}
			// RFC 6531 allows UTF-8 local parts; take accented Latin
			// letters ("josé.pérez@…") but not CJK or other scripts, which
			// in running text are more often the words before the address.
			r, size := utf8.DecodeLastRuneInString(text[:start])
			if r < 0xC0 || r > 0x24F || !unicode.IsLetter(r) {
				break
			}
			start -= size
		}
		if at-start >= maxLocalPart && start > 0 && is(text[start-1], cLocal) {
			continue // local part longer than allowed
		}
		// A quote before the address is punctuation, not part of it.
		for start < at && (text[start] == '.' || text[start] == '\'') {
			start++
		}
		end := at + 1
		for end < len(text) && end-at <= maxDomain && is(text[end], cDomain) {
			end++
		}
		for end > at+1 && (text[end-1] == '.' || text[end-1] == '-') {
			end--
		}
		local, domain := text[start:at], text[at+1:end]
		if !validLocal(local) || !validDomain(domain) {
			continue
		}
		if end < len(text) && text[end] == ':' && end+1 < len(text) && !isDigit(text[end+1]) && text[end+1] != ' ' {
			// scp-style ssh address ("git@github.com:org/repo.git"): a
			// login and a host, not a mailbox.
			continue
		}
		out = append(out, Span{Start: start, End: end, Type: Email, Score: 0.95})
		pos = end
	}
}

// fileExtensions end names such as "icon@2x.png" that have the shape of an
// address but are image or asset files.
var fileExtensions = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "webp": true,
	"bmp": true, "ico": true, "css": true, "js": true, "pdf": true, "avif": true,
}

func validLocal(s string) bool {
	return s != "" && s[len(s)-1] != '.' && !strings.Contains(s, "..")
}

func validDomain(s string) bool {
	if len(s) < 4 || len(s) > maxDomain {
		return false
	}
	labels := 0
	for rest := s; ; labels++ {
		label, tail, more := strings.Cut(rest, ".")
		if label == "" || len(label) > maxLabel || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		if !more {
			// The top-level label is alphabetic and at least two letters,
			// which keeps "x@1.2" and file names like "a@b.c" out.
			if labels == 0 || len(label) < 2 || fileExtensions[strings.ToLower(label)] {
				return false
			}
			for i := 0; i < len(label); i++ {
				if !is(label[i], cUpper|cLower) {
					return false
				}
			}
			return true
		}
		rest = tail
	}
}
