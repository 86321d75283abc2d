package detect

// Byte classes, looked up in one table so the scanners' inner loops are a
// load and a mask.
const (
	cDigit  = 1 << iota
	cUpper  // A-Z
	cLower  // a-z
	cHex    // 0-9 A-F a-f
	cToken  // A-Z a-z 0-9 _ - + / =: the alphabet of API keys and base64
	cLocal  // A-Z a-z 0-9 . _ % + - ': the practical email local part
	cDomain // A-Z a-z 0-9 . -
	cWord   // A-Z a-z 0-9 _
)

// tokenAlphabet is the size of the cToken alphabet, which bounds the
// entropy a token can have.
const tokenAlphabet = 26 + 26 + 10 + 4

var classes = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		var k uint8
		switch {
		case b >= '0' && b <= '9':
			k = cDigit | cHex | cToken | cLocal | cDomain | cWord
		case b >= 'A' && b <= 'Z':
			k = cUpper | cToken | cLocal | cDomain | cWord
			if b <= 'F' {
				k |= cHex
			}
		case b >= 'a' && b <= 'z':
			k = cLower | cToken | cLocal | cDomain | cWord
			if b <= 'f' {
				k |= cHex
			}
		}
		switch b {
		case '_':
			k |= cToken | cLocal | cWord
		case '-':
			k |= cToken | cLocal | cDomain
		case '+':
			k |= cToken | cLocal
		case '/', '=':
			k |= cToken
		case '.':
			k |= cLocal | cDomain
		case '%', '\'':
			k |= cLocal
		}
		t[c] = k
	}
	return t
}()

func is(b byte, class uint8) bool { return classes[b]&class != 0 }

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// wordAt reports whether text[i] exists and is an ASCII letter, digit or
// underscore. Bytes of multi-byte UTF-8 characters are not word bytes, so a
// number right after a CJK colon or inside non-Latin prose is still found.
func wordAt(text string, i int) bool {
	return i >= 0 && i < len(text) && is(text[i], cWord)
}

// keywordSet is a list of lower-case ASCII keywords indexed by first byte.
// It is the context check for shapes that are too common to take on their
// own (bare nine-digit numbers as SSNs, bare digit runs as phone numbers),
// and runs once per such candidate, so it compares in place instead of
// lower-casing a copy.
type keywordSet [256][]string

func newKeywordSet(words ...string) *keywordSet {
	var k keywordSet
	for _, w := range words {
		k[w[0]] = append(k[w[0]], w)
	}
	return &k
}

// before reports whether a keyword occurs, case-insensitively, within the
// window bytes before pos.
func (k *keywordSet) before(text string, pos, window int) bool {
	for i := max(0, pos-window); i < pos; i++ {
		for _, w := range k[lower(text[i])] {
			if i+len(w) <= pos && equalFoldASCII(text[i:i+len(w)], w) {
				return true
			}
		}
	}
	return false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFoldASCII reports whether s equals the lower-case word w, ignoring
// the case of ASCII letters in s.
func equalFoldASCII(s, w string) bool {
	for i := 0; i < len(w); i++ {
		if lower(s[i]) != w[i] {
			return false
		}
	}
	return true
}
