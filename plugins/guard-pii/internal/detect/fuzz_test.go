package detect_test

import (
	"context"
	"math/big"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

// checkSpans asserts what every caller relies on: spans inside the text,
// non-empty, sorted, non-overlapping, of a known type, starting and ending
// on UTF-8 boundaries; checksum types validate.
func checkSpans(t *testing.T, text string, spans []detect.Span) {
	t.Helper()
	prevEnd := 0
	for i, s := range spans {
		if s.Start < prevEnd || s.Start >= s.End || s.End > len(text) {
			t.Fatalf("span %d %+v out of order, empty or out of bounds (previous end %d, text %d bytes)", i, s, prevEnd, len(text))
		}
		prevEnd = s.End
		if !slices.Contains(detect.AllTypes, s.Type) {
			t.Fatalf("span %d has unknown type %q", i, s.Type)
		}
		if s.Score <= 0 || s.Score > 1 {
			t.Fatalf("span %d has score %v", i, s.Score)
		}
		if utf8.ValidString(text) && (!utf8.RuneStart(text[s.Start]) || (s.End < len(text) && !utf8.RuneStart(text[s.End]))) {
			t.Fatalf("span %d %+v cuts a UTF-8 character", i, s)
		}
		v := text[s.Start:s.End]
		switch s.Type {
		case detect.CreditCard:
			if !luhnValid(v) {
				t.Fatalf("card span %q fails Luhn", v)
			}
		case detect.IBAN:
			if !ibanValid(v) {
				t.Fatalf("IBAN span %q fails mod-97", v)
			}
		}
	}
}

func luhnValid(s string) bool {
	sum, double := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < '0' || s[i] > '9' {
			continue
		}
		d := int(s[i] - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// ibanValid recomputes mod 97 with big integers, independently of the
// detector's running remainder.
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	var digits strings.Builder
	for _, c := range s[4:] + s[:4] {
		if c >= 'A' && c <= 'Z' {
			digits.WriteString(big.NewInt(int64(c - 'A' + 10)).String())
		} else {
			digits.WriteRune(c)
		}
	}
	n, ok := new(big.Int).SetString(digits.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

func FuzzDetect(f *testing.F) {
	for _, l := range loadLabelled(f) {
		f.Add(l.Text)
	}
	f.Add("(+44) 20 7946 0958 +1 (+1 ((( ))) --- ... +++")
	f.Add("-----BEGIN X PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nQUJD\n")
	f.Add("eyJaaaaaaaaaaaa.eyJbbbbbbbbbbbb.")
	f.Add("::::ffff:1.2.3.4::: 1::2::3 fe80::%")
	f.Add("\xff\xfe@\xc3.com 4111\xa01111")
	f.Add("ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ ja\u200bne@x.com \u3000\xef\xbc")
	d := mustNew(f, detect.Options{})
	f.Fuzz(func(t *testing.T, text string) {
		spans, err := d.Detect(context.Background(), text, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkSpans(t, text, spans)
		// Asking for one type returns exactly that type's share of the
		// full answer.
		for _, typ := range []string{detect.Phone, detect.Secret} {
			sub, err := d.Detect(context.Background(), text, []string{typ})
			if err != nil {
				t.Fatal(err)
			}
			want := slices.DeleteFunc(slices.Clone(spans), func(s detect.Span) bool { return s.Type != typ })
			if !slices.Equal(sub, want) && !(len(sub) == 0 && len(want) == 0) {
				t.Fatalf("Detect(types=[%s]) = %v, want %v", typ, sub, want)
			}
		}
	})
}

func FuzzResolve(f *testing.F) {
	f.Add([]byte{0, 5, 0, 3, 9, 1, 2, 4, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		var in []detect.Span
		for i := 0; i+2 < len(data); i += 3 {
			start := int(data[i] % 64)
			in = append(in, detect.Span{Start: start, End: start + int(data[i+1]%16) - 2, Type: detect.AllTypes[int(data[i+2])%len(detect.AllTypes)], Score: 0.5})
		}
		out := detect.Resolve(slices.Clone(in))
		prevEnd := 0
		for _, s := range out {
			if s.Start < prevEnd || s.End <= s.Start || !slices.Contains(in, s) {
				t.Fatalf("Resolve(%v) = %v: overlapping, empty or invented span %v", in, out, s)
			}
			prevEnd = s.End
		}
		// Every valid input span is either kept or overlaps a kept span
		// that is at least as long.
		for _, s := range in {
			if s.End <= s.Start || s.Start < 0 {
				continue
			}
			if !slices.ContainsFunc(out, func(k detect.Span) bool {
				return k.Start < s.End && s.Start < k.End && k.End-k.Start >= s.End-s.Start
			}) {
				t.Fatalf("span %v dropped without a longer overlapping winner in %v", s, out)
			}
		}
	})
}
