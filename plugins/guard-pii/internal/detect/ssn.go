package detect

// ssnKeywords make a bare nine-digit number, or one grouped with spaces, an
// SSN; "123-45-6789" with dashes needs no context.
var ssnKeywords = newKeywordSet("ssn", "social security", "soc sec", "ss#", "ss #", "taxpayer", "tin")

// findSSNs finds US social security numbers in a numeric run: AAA-GG-SSSS
// (dashes), AAA GG SSSS or AAAGGSSSS after a keyword such as "SSN". Numbers
// the SSA never issues are excluded: area 000, 666 or 900-999, group 00,
// serial 0000.
func findSSNs(text string, r *numRun, out []Span) []Span {
	g := r.groups
	for a := 0; a < len(g); a++ {
		if !r.openBefore(text, a) || text[g[a].pre] == '+' {
			continue
		}
		if g[a].digits() == 9 && r.openAfter(text, a) {
			s := text[g[a].start:g[a].end]
			if validSSN(s[0:3], s[3:5], s[5:9]) && ssnKeywords.before(text, g[a].start, 40) {
				out = append(out, Span{Start: g[a].start, End: g[a].end, Type: SSN, Score: 0.7})
			}
			continue
		}
		if a+2 >= len(g) || g[a].digits() != 3 || g[a+1].digits() != 2 || g[a+2].digits() != 4 || !r.openAfter(text, a+2) {
			continue
		}
		s1, s2 := r.sep(text, a), r.sep(text, a+1)
		if s1 != s2 || (s1 != "-" && s1 != " ") {
			continue
		}
		if !validSSN(text[g[a].start:g[a].end], text[g[a+1].start:g[a+1].end], text[g[a+2].start:g[a+2].end]) {
			continue
		}
		context := ssnKeywords.before(text, g[a].start, 40)
		if s1 == " " && !context {
			continue
		}
		score := 0.85
		if context {
			score = 0.95
		}
		out = append(out, Span{Start: g[a].start, End: g[a+2].end, Type: SSN, Score: score})
		a += 2
	}
	return out
}

func validSSN(area, grp, serial string) bool {
	if area == "000" || area == "666" || area[0] == '9' {
		return false
	}
	return grp != "00" && serial != "0000"
}
