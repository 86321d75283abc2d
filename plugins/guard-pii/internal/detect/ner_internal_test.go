package detect

import (
	"testing"
	"unicode/utf8"
)

// FuzzPersonSpans feeds arbitrary text and entity offsets to the
// code-point to byte conversion: it must reject what is out of range and
// otherwise return spans on character boundaries inside the text.
func FuzzPersonSpans(f *testing.F) {
	f.Add("Zoë Müller met José", 0, 10, 15, 19)
	f.Add("\xff\xfeab", 1, 3, 0, 4)
	f.Fuzz(func(t *testing.T, text string, s1, e1, s2, e2 int) {
		spans, err := personSpans(text, []nerEntity{{Start: s1, End: e1, Type: "PERSON"}, {Start: s2, End: e2, Type: "per"}})
		runes := utf8.RuneCountInString(text)
		inRange := func(s, e int) bool { return s >= 0 && s < e && e <= runes }
		if !inRange(s1, e1) || !inRange(s2, e2) {
			if err == nil {
				t.Fatalf("offsets [%d,%d) [%d,%d) on %d characters accepted", s1, e1, s2, e2, runes)
			}
			return
		}
		if err != nil || len(spans) != 2 {
			t.Fatalf("valid offsets rejected: %v %v", spans, err)
		}
		for i, sp := range spans {
			want := []int{s1, e1, s2, e2}[2*i:]
			if sp.Start >= sp.End || sp.End > len(text) ||
				utf8.RuneCountInString(text[:sp.Start]) != want[0] || utf8.RuneCountInString(text[:sp.End]) != want[1] {
				t.Fatalf("span %+v does not cover characters [%d,%d) of %q", sp, want[0], want[1], text)
			}
		}
	})
}
