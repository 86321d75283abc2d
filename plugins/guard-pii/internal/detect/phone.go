package detect

import (
	"strconv"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Phone numbers are validated by github.com/nyaruka/phonenumbers (a port of
// Google's libphonenumber): Parse with the default region, then the
// library's VALID leniency (IsValidNumber, plus its checks on "x"
// characters and on a national prefix the region requires). The library's
// own text matcher (PhoneNumberMatcher) is not implemented in the Go port,
// so candidates come from numeric runs here, filtered the way
// libphonenumber's matcher filters them: no dates, timestamps, dotted
// quads, decimals or digit-by-digit spacing. Parsing costs tens of
// microseconds, so only windows that pass those byte-level filters reach it.

// phoneKeywords let a bare digit run ("4155552671") count as a phone
// number. Without one, a run of digits is far more often an order number, an
// id or an amount than a phone number.
var phoneKeywords = newKeywordSet("phone", "tel", "call", "mobile", "cell", "fax", "whatsapp", "sms", "dial", "contact", "mob.", "ph.")

const (
	minPhoneDigits = 7
	maxPhoneDigits = 15 // E.164; an international prefix ("011", "00") fits too
	// maxPhoneParses bounds library calls per numeric run, so a long table
	// of space-separated numbers costs a few parses, not one per window.
	maxPhoneParses = 6
)

// phoneFinder holds the state of one Detect call: the default region and
// the verdicts on candidates already parsed, since the same number tends to
// recur in a document.
type phoneFinder struct {
	region string
	cache  map[string]bool
}

func newPhoneFinder(region string) *phoneFinder {
	return &phoneFinder{region: region, cache: map[string]bool{}}
}

// find appends the phone numbers in r, taking windows of groups longest
// first from each possible start.
func (p *phoneFinder) find(text string, r *numRun, out []Span) []Span {
	g := r.groups
	parses := 0
	for a := 0; a < len(g); a++ {
		if !r.openBefore(text, a) {
			continue
		}
		digits := 0
		for k := a; k < len(g); k++ {
			digits += g[k].digits()
		}
		for b := len(g) - 1; b >= a; b-- {
			if b < len(g)-1 {
				digits -= g[b+1].digits()
			}
			if digits < minPhoneDigits {
				break
			}
			if digits > maxPhoneDigits || !r.openAfter(text, b) || (b == len(g)-1 && r.colon) {
				continue
			}
			plus := text[g[a].pre] == '+'
			if a == b && !plus && !phoneKeywords.before(text, g[a].pre, 32) {
				continue
			}
			if !plausiblePhone(text, r, a, b) {
				continue
			}
			cand := text[g[a].pre:g[b].end]
			valid, seen := p.cache[cand]
			if !seen {
				if parses == maxPhoneParses {
					return out
				}
				parses++
				valid = p.valid(cand)
				p.cache[cand] = valid
			}
			if !valid {
				continue
			}
			score := 0.8
			switch {
			case plus:
				score = 0.9
			case a == b:
				score = 0.6
			}
			out = append(out, Span{Start: g[a].pre, End: g[b].end, Type: Phone, Score: score})
			a = b
			break
		}
	}
	return out
}

func (p *phoneFinder) valid(cand string) bool {
	if valid, decided := fastPhoneValid(cand, p.region); decided {
		return valid
	}
	return libraryPhoneValid(cand, p.region)
}

// libraryPhoneValid is the phone-number library's verdict: Parse, then the
// VALID leniency (IsValidNumber plus its checks on the written form).
func libraryPhoneValid(cand, region string) bool {
	num, err := phonenumbers.ParseAndKeepRawInput(cand, region)
	if err != nil {
		return false
	}
	return phonenumbers.VALID.Verify(num, cand)
}

// plausiblePhone applies the byte-level filters to the window of groups
// a..b.
func plausiblePhone(text string, r *numRun, a, b int) bool {
	g := r.groups
	s := text[g[a].pre:g[b].end]
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth < 0 || depth > 1 {
			return false
		}
	}
	if depth != 0 || strings.Count(s, "/") > 1 {
		return false
	}
	dots := 0
	for k := a; k <= b; k++ {
		// Digit-by-digit spacing ("1 2 3 4 5 6 7") is a list, not a number;
		// a one-digit country code or area code ("+1 415", "+33 1 42")
		// comes first or second.
		if g[k].digits() == 1 && k > a+1 {
			return false
		}
		if k < b && strings.IndexByte(r.sep(text, k), '.') >= 0 {
			dots++
		}
	}
	n := b - a + 1
	if dots > 0 && (n == 2 || (n == 4 && dots == 3 && allShort(g[a:b+1], 3))) {
		return false // a decimal ("3.14159265") or a dotted quad
	}
	for k := a; k+2 <= b; k++ {
		if dateTriple(text, r, k) {
			return false
		}
	}
	return true
}

func allShort(gs []group, n int) bool {
	for _, x := range gs {
		if x.digits() > n {
			return false
		}
	}
	return true
}

// dateTriple reports whether groups k, k+1, k+2 read as a date: YYYY-MM-DD,
// DD.MM.YYYY, MM/DD/YYYY or with a two-digit year, joined by the same "-",
// "/" or "." twice.
func dateTriple(text string, r *numRun, k int) bool {
	s1, s2 := r.sep(text, k), r.sep(text, k+1)
	if s1 != s2 || (s1 != "-" && s1 != "/" && s1 != ".") {
		return false
	}
	g := r.groups
	n := func(i int) int {
		v, _ := strconv.Atoi(text[g[i].start:g[i].end])
		return v
	}
	l0, l1, l2 := g[k].digits(), g[k+1].digits(), g[k+2].digits()
	day := func(v int) bool { return v >= 1 && v <= 31 }
	month := func(v int) bool { return v >= 1 && v <= 12 }
	switch {
	case l0 == 4 && l1 <= 2 && l2 <= 2:
		return month(n(k+1)) && day(n(k+2))
	case l0 <= 2 && l1 <= 2 && (l2 == 4 || l2 == 2):
		x, y := n(k), n(k+1)
		return (day(x) && month(y)) || (month(x) && day(y))
	}
	return false
}
