package detect

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// phoneOracleCases builds inputs for the fast path: every region's example
// numbers of every type in E.164, international and national format, then
// mutations of each (a digit changed, dropped or added, a prefix added or
// removed), each to be read with the number's own region and with US as
// the default, plus random digit strings in common groupings read with a
// spread of regions.
func phoneOracleCases(stride int) (cases [][2]string) {
	types := []phonenumbers.PhoneNumberType{phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE,
		phonenumbers.PREMIUM_RATE, phonenumbers.SHARED_COST, phonenumbers.VOIP, phonenumbers.PERSONAL_NUMBER,
		phonenumbers.PAGER, phonenumbers.UAN, phonenumbers.VOICEMAIL}
	regions := make([]string, 0, 256)
	for r := range phonenumbers.GetSupportedRegions() {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	add := func(cand, region string) {
		if onlyCandidateChars(cand) {
			cases = append(cases, [2]string{cand, region})
		}
	}
	n := 0
	for _, region := range regions {
		for _, typ := range types {
			num := phonenumbers.GetExampleNumberForType(region, typ)
			if num == nil {
				continue
			}
			for _, f := range []phonenumbers.PhoneNumberFormat{phonenumbers.E164, phonenumbers.INTERNATIONAL, phonenumbers.NATIONAL} {
				n++
				if n%stride != 0 {
					continue
				}
				s := phonenumbers.Format(num, f)
				for _, m := range mutations(s) {
					add(m, region)
					add(m, "US")
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	groupings := [][]int{{3, 3, 4}, {3, 4}, {2, 4, 4}, {4, 3, 3}, {10}, {11}, {1, 3, 3, 4}, {2, 2, 2, 2, 2}, {3, 2, 2, 2}, {4, 6}, {2, 3, 4}}
	spread := []string{"US", "GB", "DE", "FR", "IN", "JP", "BR", "AU", "IT", "CN", "RU", "MX", "NL", "CH", "SE", "AR", "KR", "ES", "ZA", "NG"}
	for i := 0; i < 6000/stride; i++ {
		g := groupings[r.IntN(len(groupings))]
		var b strings.Builder
		if r.IntN(3) == 0 {
			b.WriteByte('+')
		}
		for k, size := range g {
			if k > 0 {
				b.WriteByte(" -."[r.IntN(3)])
			}
			for j := 0; j < size; j++ {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		add(b.String(), spread[r.IntN(len(spread))])
	}
	return cases
}

// onlyCandidateChars reports whether s has the shape the scanner produces.
func onlyCandidateChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && !isSepByte(c) && !(c == '+' && (i == 0 || (i == 1 && s[0] == '('))) {
			return false
		}
	}
	return true
}

func mutations(s string) []string {
	out := []string{s}
	var digitPos []int
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			digitPos = append(digitPos, i)
		}
	}
	if len(digitPos) < 3 {
		return out
	}
	bump := func(i int) string {
		return s[:i] + string('0'+(s[i]-'0'+1)%10) + s[i+1:]
	}
	last := digitPos[len(digitPos)-1]
	out = append(out,
		bump(digitPos[1]), bump(digitPos[len(digitPos)/2]),
		s[:last]+s[last+1:], // one digit fewer
		s+"7",               // one digit more
		strings.TrimPrefix(s, "+"),
		"0"+strings.TrimPrefix(s, "+"),
		"1 "+s,
	)
	if !strings.HasPrefix(s, "+") {
		out = append(out, "+"+s, "("+s[:digitPos[2]+1]+") "+s[digitPos[2]+1:])
	}
	return out
}

// TestFastPhoneMatchesLibrary holds the fast path to the library's verdict.
func TestFastPhoneMatchesLibrary(t *testing.T) {
	stride := 1
	switch {
	case raceEnabled:
		stride = 25
	case testing.Short():
		stride = 7
	}
	cases := phoneOracleCases(stride)
	var mismatches []string
	decided, valid := 0, 0
	for _, c := range cases {
		lib := libraryPhoneValid(c[0], c[1])
		fast, ok := fastPhoneValid(c[0], c[1])
		if lib {
			valid++
		}
		if !ok {
			continue
		}
		decided++
		if fast != lib {
			mismatches = append(mismatches, fmt.Sprintf("%q in %s: fast %v, library %v", c[0], c[1], fast, lib))
		}
	}
	t.Logf("%d inputs (%d valid per the library), %d decided by the fast path, %d passed to the library", len(cases), valid, decided, len(cases)-decided)
	if len(mismatches) > 0 {
		if len(mismatches) > 30 {
			mismatches = mismatches[:30]
		}
		t.Errorf("fast path disagrees with the library:\n%s", strings.Join(mismatches, "\n"))
	}
}
