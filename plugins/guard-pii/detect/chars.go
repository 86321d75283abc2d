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

// hasKeywordBefore reports whether one of keywords (lower case) occurs in the
// window bytes before pos, case-insensitively. It is the context check for
// shapes that are too common to take on their own (bare nine-digit numbers
// as SSNs, bare digit runs as phone numbers).
func hasKeywordBefore(text string, pos, window int, keywords []string) bool {
	var buf [64]byte
	from := max(0, pos-min(window, len(buf)))
	b := buf[:0]
	for i := from; i < pos; i++ {
		c := text[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	for _, k := range keywords {
		if containsBytes(b, k) {
			return true
		}
	}
	return false
}

// containsBytes is strings.Contains for a byte slice, without converting it
// (which would allocate).
func containsBytes(b []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == sub {
			return true
		}
	}
	return false
}
