package piitest

import (
	"cmp"
	"context"
	"regexp"
	"slices"

	"github.com/cexec/cexec/pluginapi/guard"
)

// patterns are deliberately plain: tests of what cexecd does with spans
// (tokens, vaults, policies) need values found, not the guard-pii plugin's
// precision, which its own tests measure.
var patterns = []struct {
	typ string
	re  *regexp.Regexp
}{
	{"EMAIL", regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)},
	{"US_SSN", regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)},
	{"CREDIT_CARD", regexp.MustCompile(`\b(?:\d{4}[ -]?){3}\d{4}\b`)},
	{"IBAN", regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b`)},
	{"PHONE", regexp.MustCompile(`(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\) ?|\b\d{3}[ .-]?)\d{3}[ .-]\d{4}\b`)},
	// A prefix joined by a hyphen to a long hex run, as in many API keys
	// and cexec's session ids.
	{"SECRET", regexp.MustCompile(`\b[0-9A-Za-z]+-[0-9a-f]{32,}\b`)},
	{"IP_ADDRESS", regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b|\b[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){2,7}\b`)},
}

// Detector finds emails, US SSNs, payment cards, IBANs, phone numbers,
// hexadecimal secrets and IP addresses with one regular expression each. It implements the
// detector cexecd's vault consumes and, embedded in a guard, guard.Guard's
// Detect.
type Detector struct{}

// Detect returns the spans of req.Text, of req.Types when set, in text
// order; where two overlap the earlier (then the longer) wins.
func (Detector) Detect(_ context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	var spans []guard.Span
	for _, p := range patterns {
		if len(req.Types) > 0 && !slices.Contains(req.Types, p.typ) {
			continue
		}
		for _, m := range p.re.FindAllStringIndex(req.Text, -1) {
			spans = append(spans, guard.Span{Start: m[0], End: m[1], Type: p.typ, Score: 1})
		}
	}
	slices.SortFunc(spans, func(a, b guard.Span) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(b.End, a.End))
	})
	out := spans[:0]
	for _, s := range spans {
		if len(out) == 0 || s.Start >= out[len(out)-1].End {
			out = append(out, s)
		}
	}
	return out, nil
}
