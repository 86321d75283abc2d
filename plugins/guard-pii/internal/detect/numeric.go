package detect

import "strings"

// A numeric run is a maximal stretch of digit groups joined by short
// separators ("+1 (415) 555-2671", "4111 1111 1111 1111", "10.0.0.1",
// "2024-01-15"). One scan finds the runs; the phone, SSN, card and IPv4
// detectors then look at windows of consecutive groups within each run. A
// window may only begin or end where the text breaks at a space, so two
// numbers written side by side are read apart, but a number is never cut in
// the middle of a "-" or "." grouping.

// group is one run of digits: text[start:end]. pre is where the group
// begins including a "+", "(" or "(+" written right before its first digit.
type group struct {
	start, end, pre int
}

func (g group) digits() int { return g.end - g.start }

type numRun struct {
	groups []group
	// digits counts the digits of all groups.
	digits int
	// glued: the run is directly followed by a letter, or by "-", "." or
	// "/" and a letter ("555-1234abc", "12-34.txt"), so it is part of a
	// larger token.
	glued bool
	// colon: the run is directly followed by ":" and a digit, as the hour
	// of a timestamp is.
	colon bool
}

// sep returns the separator between group i and group i+1.
func (r *numRun) sep(text string, i int) string {
	return text[r.groups[i].end:r.groups[i+1].start]
}

// openAfter reports whether a window may end at group b: the run ends there,
// or the separator after it contains a space.
func (r *numRun) openAfter(text string, b int) bool {
	if b == len(r.groups)-1 {
		return !r.glued
	}
	return strings.IndexByte(r.sep(text, b), ' ') >= 0
}

// openBefore reports whether a window may begin at group a.
func (r *numRun) openBefore(text string, a int) bool {
	return a == 0 || strings.IndexByte(r.sep(text, a-1), ' ') >= 0
}

func isSepByte(b byte) bool {
	switch b {
	case ' ', '-', '.', '/', '(', ')':
		return true
	}
	return false
}

// validSep accepts separators of one to three bytes with at most one of
// "-", "." and "/", one of each parenthesis and two spaces: "-", " ", ") ",
// " (", " - ", ".".
func validSep(s string) bool {
	var punct, spaces, open, closed int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			spaces++
		case '(':
			open++
		case ')':
			closed++
		default:
			punct++
		}
	}
	if open > 1 || closed > 1 || punct > 1 || spaces > 2 {
		return false
	}
	// "( " and " )" put the space inside the parentheses.
	return !strings.Contains(s, "( ") && !strings.Contains(s, " )")
}

// runStart marks the bytes a numeric run can start with.
var runStart = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['+'], t['('] = true, true
	return t
}()

// scanNumeric calls fn for every numeric run in text. The run's groups slice
// is reused between calls.
func scanNumeric(text string, fn func(r *numRun)) {
	var r numRun
	n := len(text)
	for i := 0; i < n; {
		// Most bytes start nothing: skip them in a tight loop.
		for i < n && !runStart[text[i]] {
			i++
		}
		if i == n {
			break
		}
		c := text[i]
		lead := 0 // bytes before the first digit: "+", "(" or "(+"
		switch {
		case c == '(' && i+2 < n && text[i+1] == '+' && isDigit(text[i+2]):
			lead = 2
		case (c == '+' || c == '(') && i+1 < n && isDigit(text[i+1]):
			lead = 1
		case c == '+' || c == '(':
			i++
			continue
		}
		if wordAt(text, i-1) || gluedBefore(text, i) {
			// Part of a word or identifier ("abc123", "v1.2", "ID-4111"):
			// skip to the end of it.
			i++
			for i < n && (is(text[i], cWord) || (isSepByte(text[i]) && text[i] != ' ' && wordAt(text, i+1))) {
				i++
			}
			continue
		}
		r.groups = r.groups[:0]
		r.digits = 0
		pre := i
		i += lead
		for {
			start := i
			for i < n && isDigit(text[i]) {
				i++
			}
			r.groups = append(r.groups, group{start: start, end: i, pre: pre})
			r.digits += i - start
			j := i
			for j < n && j-i < 3 && isSepByte(text[j]) {
				j++
			}
			if j == i || j >= n || !isDigit(text[j]) || !validSep(text[i:j]) {
				break
			}
			pre = j
			if text[j-1] == '(' {
				pre = j - 1
			}
			i = j
		}
		r.glued = wordAt(text, i) || (i+1 < n && (text[i] == '-' || text[i] == '.' || text[i] == '/') && is(text[i+1], cUpper|cLower) && !fileExtAt(text, i))
		r.colon = i+1 < n && text[i] == ':' && isDigit(text[i+1])
		fn(&r)
		for i < n && is(text[i], cWord) {
			i++
		}
	}
}

// fileExts are extensions after which a number ends a file name
// ("ssn 123-45-6789.pdf", a statement "4111111111111111.csv") instead of
// running into a word: listing a folder must not show them raw.
var fileExts = map[string]bool{"txt": true, "pdf": true, "csv": true, "tsv": true, "json": true, "xml": true, "html": true,
	"htm": true, "md": true, "log": true, "doc": true, "docx": true, "xls": true, "xlsx": true, "odt": true, "ods": true,
	"png": true, "jpg": true, "jpeg": true, "gif": true, "tif": true, "tiff": true, "zip": true, "eml": true, "msg": true,
	"yaml": true, "yml": true, "vcf": true}

// fileExtAt reports whether text[i] is the dot of a file extension that
// ends the word: ".pdf" followed by a non-word byte or the end.
func fileExtAt(text string, i int) bool {
	if i >= len(text) || text[i] != '.' {
		return false
	}
	j := i + 1
	for j < len(text) && j-i <= 5 && is(text[j], cUpper|cLower) {
		j++
	}
	if wordAt(text, j) || j < len(text) && text[j] == '.' && wordAt(text, j+1) {
		return false
	}
	return fileExts[strings.ToLower(text[i+1:j])]
}

// gluedBefore reports whether the digit or lead at i follows "-", "." or
// "/" that itself follows a letter or digit, as in "ABC-123-45-6789" or
// "v1.2.3".
func gluedBefore(text string, i int) bool {
	if i < 2 {
		return false
	}
	switch text[i-1] {
	case '-', '.', '/', '_':
		return wordAt(text, i-2)
	}
	return false
}

// findNumeric runs the enabled numeric detectors over every numeric run.
func (d *Detector) findNumeric(text string, out []Span) []Span {
	var phones *phoneFinder
	if d.enabled[Phone] {
		phones = newPhoneFinder(d.region)
	}
	ssn, card, ip := d.enabled[SSN], d.enabled[CreditCard], d.enabled[IPAddress]
	scanNumeric(text, func(r *numRun) {
		// Most runs are short numbers: amounts, counts, years. Nothing
		// here takes fewer than seven digits except a dotted quad, which
		// has four groups.
		if r.digits < minPhoneDigits && len(r.groups) < 4 {
			return
		}
		if ssn {
			out = findSSNs(text, r, out)
		}
		if card {
			out = findCards(text, r, out)
		}
		if ip {
			out = findIPv4(text, r, out)
		}
		if phones != nil {
			out = phones.find(text, r, out)
		}
	})
	return out
}
