package detect

// findCards finds payment card numbers in a numeric run: 13 to 19 digits,
// written together or grouped the way cards are printed (4-4-4-4,
// 4-4-4-4-3, 4-6-5 for Amex, 4-6-4 for Diners) with one kind of separator
// (space or dash), passing the Luhn check and starting with the IIN of a
// known scheme.
func findCards(text string, r *numRun, out []Span) []Span {
	g := r.groups
	for a := 0; a < len(g); a++ {
		if !r.openBefore(text, a) || text[g[a].pre] == '+' {
			continue
		}
		// Longest window first, so a 19-digit card is not read as its first
		// 16 digits.
		for b := min(len(g)-1, a+4); b >= a; b-- {
			if !r.openAfter(text, b) || !cardGrouping(text, r, a, b) {
				continue
			}
			var digits [19]byte
			n := 0
			for k := a; k <= b; k++ {
				n += copy(digits[n:], text[g[k].start:g[k].end])
			}
			if !luhn(digits[:n]) || !knownIIN(digits[:n]) {
				continue
			}
			out = append(out, Span{Start: g[a].start, End: g[b].end, Type: CreditCard, Score: 0.95})
			a = b
			break
		}
	}
	return out
}

// cardGrouping reports whether groups a..b have a card's length and layout.
func cardGrouping(text string, r *numRun, a, b int) bool {
	g := r.groups
	total := 0
	for k := a; k <= b; k++ {
		total += g[k].digits()
	}
	if total < 13 || total > 19 {
		return false
	}
	if a == b {
		return true
	}
	sep := r.sep(text, a)
	if sep != " " && sep != "-" {
		return false
	}
	for k := a + 1; k < b; k++ {
		if r.sep(text, k) != sep {
			return false
		}
	}
	var layout [5]int
	for k := a; k <= b; k++ {
		layout[k-a] = g[k].digits()
	}
	switch layout {
	case [5]int{4, 4, 4, 4}, [5]int{4, 4, 4, 4, 3}, [5]int{4, 6, 5}, [5]int{4, 6, 4}:
		return true
	}
	return false
}

// luhn reports whether digits (ASCII) pass the Luhn mod-10 check.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// iinRange is a range of issuer identification number prefixes of one
// length, with the card lengths the scheme issues.
type iinRange struct {
	lo, hi   int // inclusive, over the first len(digits of lo) digits
	prefix   int // number of leading digits compared
	min, max int // card length
}

// iins lists the schemes' prefixes (ISO/IEC 7812 registrations as published
// by the schemes): Visa, Mastercard, American Express, Discover, Diners
// Club, JCB, UnionPay, Maestro, Mir, RuPay, Troy.
var iins = []iinRange{
	{4, 4, 1, 13, 19},       // Visa
	{51, 55, 2, 16, 16},     // Mastercard
	{2221, 2720, 4, 16, 16}, // Mastercard 2-series
	{34, 34, 2, 15, 15},     // American Express
	{37, 37, 2, 15, 15},     // American Express
	{6011, 6011, 4, 16, 19}, // Discover
	{644, 649, 3, 16, 19},   // Discover
	{65, 65, 2, 16, 19},     // Discover / RuPay
	{300, 305, 3, 14, 19},   // Diners Club International
	{36, 36, 2, 14, 19},     // Diners Club International
	{38, 39, 2, 14, 19},     // Diners Club
	{3528, 3589, 4, 16, 19}, // JCB
	{62, 62, 2, 16, 19},     // UnionPay
	{81, 81, 2, 16, 19},     // UnionPay
	{50, 50, 2, 13, 19},     // Maestro
	{56, 58, 2, 13, 19},     // Maestro
	{6304, 6304, 4, 13, 19}, // Maestro (Laser)
	{639, 639, 3, 13, 19},   // Maestro
	{67, 67, 2, 13, 19},     // Maestro
	{2200, 2204, 4, 16, 19}, // Mir
	{60, 60, 2, 16, 16},     // RuPay
	{9792, 9792, 4, 16, 16}, // Troy
}

func knownIIN(digits []byte) bool {
	for _, r := range iins {
		if len(digits) < r.min || len(digits) > r.max {
			continue
		}
		p := 0
		for _, c := range digits[:r.prefix] {
			p = p*10 + int(c-'0')
		}
		if p >= r.lo && p <= r.hi {
			return true
		}
	}
	return false
}
