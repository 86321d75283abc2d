package vault

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// Limits of the token syntax. Text longer than this is never a token, so
// the scanner looks at a bounded window after each '['.
const (
	maxTypeLen   = 32
	maxDigits    = 18 // fits a uint64 with room to spare
	maxTokenLen  = 1 + maxTypeLen + 1 + maxDigits + 1
	literalType  = "LITERAL"
	fallbackType = "PII"
)

// tokenText returns "[TYPE_N]".
func tokenText(typ string, n uint64) string {
	b := make([]byte, 0, len(typ)+24)
	b = append(b, '[')
	b = append(b, typ...)
	b = append(b, '_')
	b = strconv.AppendUint(b, n, 10)
	return string(append(b, ']'))
}

// tokenAt reports whether s[i:] starts with token-shaped text
// "[TYPE_N]" (TYPE: an upper-case letter, then upper-case letters, digits
// and '_'; N: a decimal without leading zeros) and returns its end.
func tokenAt(s string, i int) (end int, ok bool) {
	if i+4 > len(s) || s[i] != '[' || s[i+1] < 'A' || s[i+1] > 'Z' {
		return 0, false
	}
	lastUnderscore := -1
	for j := i + 2; j < len(s) && j-i < maxTokenLen; j++ {
		c := s[j]
		switch {
		case c == '_':
			lastUnderscore = j
		case c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		case c == ']':
			if lastUnderscore < 0 || lastUnderscore == j-1 {
				return 0, false
			}
			digits := s[lastUnderscore+1 : j]
			if digits[0] == '0' || len(digits) > maxDigits || lastUnderscore-(i+1) > maxTypeLen {
				return 0, false
			}
			for k := 0; k < len(digits); k++ {
				if digits[k] < '0' || digits[k] > '9' {
					return 0, false
				}
			}
			return j + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// forEachToken calls fn with the bounds of every token-shaped substring of
// s, left to right. Token-shaped text cannot contain brackets, so matches
// never overlap.
func forEachToken(s string, fn func(start, end int)) {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '[')
		if k < 0 {
			return
		}
		i += k
		if end, ok := tokenAt(s, i); ok {
			fn(i, end)
			i = end
		} else {
			i++
		}
	}
}

// tokenType turns a detector's type name into the TYPE of a token:
// upper-case ASCII letters, digits and '_', starting with a letter, at most
// maxTypeLen bytes. Detectors that agree on a name share a numbering.
func tokenType(t string) string {
	var b strings.Builder
	for _, r := range t {
		r = unicode.ToUpper(r)
		switch {
		case r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), "_")
	if s == "" {
		return fallbackType
	}
	if s[0] < 'A' || s[0] > 'Z' {
		s = fallbackType + "_" + s
	}
	if len(s) > maxTypeLen {
		s = strings.TrimRight(s[:maxTypeLen], "_")
	}
	return s
}

// normalize returns the form of a value under which equal values share a
// token: the way people write one email address or phone number varies,
// the value does not. Types without a rule compare exactly.
func normalize(typ, value string) string {
	switch typ {
	case "EMAIL":
		return strings.ToLower(value)
	case "PHONE":
		// Digits only, so "(212) 555-0100" and "212.555.0100" agree. A
		// country code written in one form and left out in another
		// still makes two values: deciding that needs the number's
		// region, which the detector knows and the host does not.
		return digits(value)
	case "US_SSN", "CREDIT_CARD":
		return digits(value)
	case "IBAN":
		return strings.ToUpper(strings.Join(strings.Fields(value), ""))
	case "IP_ADDRESS":
		if a, err := netip.ParseAddr(value); err == nil {
			return a.Unmap().String()
		}
		return strings.ToLower(value)
	case "PERSON":
		return strings.ToLower(strings.Join(strings.Fields(value), " "))
	}
	return value
}

func digits(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b = append(b, s[i])
		}
	}
	if len(b) == 0 {
		return s
	}
	return string(b)
}
