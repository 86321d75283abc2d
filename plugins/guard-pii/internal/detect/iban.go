package detect

// ibanLengths is the IBAN length of each country in the SWIFT IBAN registry
// (including the partner territories that use another country's format).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
	"BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
	"DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
	"FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
	"GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
	"LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
	"MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
	"YE": 30,
	// Territories using the French IBAN format.
	"GF": 27, "GP": 27, "MQ": 27, "RE": 27, "PF": 27, "TF": 27, "YT": 27, "NC": 27,
	"PM": 27, "WF": 27, "BL": 27, "MF": 27,
}

// ibanLen is ibanLengths as a table indexed by the two letters, for the
// scan's inner loop.
var ibanLen = func() (t [26][26]uint8) {
	for cc, n := range ibanLengths {
		t[cc[0]-'A'][cc[1]-'A'] = uint8(n)
	}
	return t
}()

// matchIBAN matches an IBAN at i, in electronic form
// (DE89370400440532013000) or print form, in groups of four separated by
// single spaces (DE89 3704 0044 0532 0130 00): upper-case country code with
// the registry's length, two check digits, and a valid ISO 7064 mod-97
// checksum. The caller has checked that i starts a word.
func matchIBAN(text string, i int) (int, bool) {
	n := len(text)
	if i+4 > n {
		return 0, false
	}
	c0, c1 := text[i], text[i+1]
	if c0 < 'A' || c0 > 'Z' || c1 < 'A' || c1 > 'Z' || !isDigit(text[i+2]) || !isDigit(text[i+3]) {
		return 0, false
	}
	want := int(ibanLen[c0-'A'][c1-'A'])
	if want == 0 {
		return 0, false
	}
	// Collect want characters; a single space may follow every fourth.
	var buf [34]byte
	got, j := 0, i
	for j < n && got < want {
		c := text[j]
		if c == ' ' && got%4 == 0 && got > 0 && j+1 < n && is(text[j+1], cUpper|cDigit) {
			j++
			continue
		}
		if !is(c, cUpper|cDigit) {
			break
		}
		buf[got] = c
		got++
		j++
	}
	if got != want || wordAt(text, j) || !ibanChecksum(buf[:got]) {
		return 0, false
	}
	return j, true
}

// ibanChecksum computes ISO 7064 mod 97-10 over the IBAN with its first
// four characters moved to the end and letters as 10..35; valid IBANs leave
// remainder 1.
func ibanChecksum(s []byte) bool {
	rem := 0
	add := func(c byte) {
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
			return
		}
		rem = (rem*100 + int(c-'A') + 10) % 97
	}
	for _, c := range s[4:] {
		add(c)
	}
	for _, c := range s[:4] {
		add(c)
	}
	return rem == 1
}
