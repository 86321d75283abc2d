// Package detect finds sensitive values in text: email addresses, phone
// numbers, US social security numbers, payment card numbers, IBANs, IP
// addresses, secrets (known token formats plus a high-entropy rule) and, when
// an external NER endpoint is configured, person names.
//
// Detection returns typed spans (byte offsets, end exclusive) that never
// overlap and come sorted by offset, so a tokenizer can replace them in one
// pass. Detectors are prefiltered by cheap byte scans: the expensive checks
// (phone-number metadata, checksums, netip) only run on candidates, and
// three passes over the text (numeric runs, token runs, "@" and ":") do the
// rest; BenchmarkDetect1MB measures a megabyte of mixed text.
package detect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/nyaruka/phonenumbers"

	"github.com/cexec/cexec/pluginapi/guard"
)

// Span is a detected value. It is the guard API's span, so detector output
// can go to the host's tokenizer unchanged.
type Span = guard.Span

// The detected types.
const (
	Email      = "EMAIL"
	Phone      = "PHONE"
	SSN        = "US_SSN"
	CreditCard = "CREDIT_CARD"
	IBAN       = "IBAN"
	IPAddress  = "IP_ADDRESS"
	Secret     = "SECRET"
	Person     = "PERSON"
)

// AllTypes lists every type this package can detect, in a stable order.
var AllTypes = []string{Email, Phone, SSN, CreditCard, IBAN, IPAddress, Secret, Person}

// DefaultTypes are the types enabled when Options.Types is empty: all but
// Person, which needs an NER endpoint (New adds it when one is configured).
var DefaultTypes = []string{Email, Phone, SSN, CreditCard, IBAN, IPAddress, Secret}

// Defaults for Options fields left zero.
const (
	DefaultPhoneRegion      = "US"
	DefaultEntropyThreshold = 3.5
	DefaultEntropyMinLength = 20
)

// priority breaks ties between overlapping spans of equal length: a value
// that validates by checksum or a fixed prefix outranks one that only fits a
// shape.
var priority = map[string]int{
	Secret:     8,
	Email:      7,
	IBAN:       6,
	CreditCard: 5,
	SSN:        4,
	IPAddress:  3,
	Phone:      2,
	Person:     1,
}

// Options configure a Detector. The zero value detects DefaultTypes with
// default settings.
type Options struct {
	// Types enabled; empty means DefaultTypes, plus Person when NER is set.
	Types []string
	// PhoneRegion is the ISO 3166 region (for example "US", "GB") used to
	// read phone numbers written in national format. Numbers written with
	// "+" or an international prefix are read in any region.
	PhoneRegion string
	// EntropyThreshold is the minimum Shannon entropy, in bits per
	// character, of a token for the high-entropy secret rule.
	EntropyThreshold float64
	// EntropyMinLength is the minimum length of a token the high-entropy
	// rule looks at.
	EntropyMinLength int
	// DisableEntropy turns the high-entropy rule off; known token formats
	// are still detected as Secret.
	DisableEntropy bool
	// NER detects Person names; nil means Person cannot be enabled.
	NER *NERClient
}

// Detector finds spans. It is immutable after New and safe for concurrent
// use.
type Detector struct {
	enabled          map[string]bool
	region           string
	entropyThreshold float64
	entropyMinLength int
	entropy          bool
	ner              *NERClient
}

// CheckTypes validates a list of type names: every name known, no
// duplicates, Person only when an NER endpoint is configured.
func CheckTypes(types []string, haveNER bool) error {
	seen := map[string]bool{}
	for _, t := range types {
		if _, ok := priority[t]; !ok {
			return fmt.Errorf("unknown type %q (known: %v)", t, AllTypes)
		}
		if seen[t] {
			return fmt.Errorf("type %q listed twice", t)
		}
		seen[t] = true
		if t == Person && !haveNER {
			return errors.New("type PERSON needs an NER endpoint (ner_url)")
		}
	}
	return nil
}

// CheckRegion validates a default phone region code.
func CheckRegion(region string) error {
	if !phonenumbers.GetSupportedRegions()[region] {
		return fmt.Errorf("%q is not a region the phone-number library knows (use an ISO 3166 alpha-2 code such as US, GB, DE)", region)
	}
	return nil
}

// CheckEntropy validates the high-entropy rule's settings. The threshold is
// bounded by log2 of the token alphabet (66 characters, about 6.04 bits).
func CheckEntropy(threshold float64, minLength int) error {
	if threshold <= 0 || threshold > math.Log2(float64(tokenAlphabet)) || math.IsNaN(threshold) {
		return fmt.Errorf("entropy threshold %v is outside (0, %.2f] bits per character", threshold, math.Log2(float64(tokenAlphabet)))
	}
	if minLength < 8 || minLength > 1024 {
		return fmt.Errorf("entropy minimum length %d is outside [8, 1024]", minLength)
	}
	return nil
}

// New returns a Detector for opts, with defaults filled in.
func New(opts Options) (*Detector, error) {
	d := &Detector{
		region:           opts.PhoneRegion,
		entropyThreshold: opts.EntropyThreshold,
		entropyMinLength: opts.EntropyMinLength,
		entropy:          !opts.DisableEntropy,
		ner:              opts.NER,
		enabled:          map[string]bool{},
	}
	if d.region == "" {
		d.region = DefaultPhoneRegion
	}
	if d.entropyThreshold == 0 {
		d.entropyThreshold = DefaultEntropyThreshold
	}
	if d.entropyMinLength == 0 {
		d.entropyMinLength = DefaultEntropyMinLength
	}
	types := opts.Types
	if len(types) == 0 {
		types = DefaultTypes
		if opts.NER != nil {
			types = append(slices.Clone(DefaultTypes), Person)
		}
	}
	if err := CheckTypes(types, opts.NER != nil); err != nil {
		return nil, err
	}
	if err := CheckRegion(d.region); err != nil {
		return nil, err
	}
	if err := CheckEntropy(d.entropyThreshold, d.entropyMinLength); err != nil {
		return nil, err
	}
	for _, t := range types {
		d.enabled[t] = true
	}
	if d.enabled[Phone] {
		metaFor(0, d.region) // compile the region's patterns now, not in the first Detect
	}
	return d, nil
}

// Types returns the enabled types in AllTypes order.
func (d *Detector) Types() []string {
	var out []string
	for _, t := range AllTypes {
		if d.enabled[t] {
			out = append(out, t)
		}
	}
	return out
}

// Detect returns the spans of text with a type in types (all enabled types
// when types is empty), sorted by offset and non-overlapping. Names in types
// that are unknown or not enabled are ignored: the host may ask several
// guards for the union of what it wants.
//
// Every enabled type except Person takes part in overlap resolution even
// when types asks for fewer, so asking for a subset returns a subset of what
// asking for everything returns. Person is only looked up (one call to the
// NER endpoint) when asked for; if that call fails Detect fails, because a
// partial answer would leave names in the clear.
//
// The local detectors read fullwidth forms as ASCII and skip zero-width
// characters (see fold); spans are always offsets into text.
func (d *Detector) Detect(ctx context.Context, text string, types []string) ([]Span, error) {
	want := d.enabled
	if len(types) > 0 {
		want = map[string]bool{}
		for _, t := range types {
			if d.enabled[t] {
				want[t] = true
			}
		}
		if len(want) == 0 {
			return nil, nil
		}
	}
	// The NER endpoint answers over the network: ask it first and detect
	// the rest while it works.
	type nerResult struct {
		spans []Span
		err   error
	}
	var people chan nerResult
	if want[Person] && d.ner != nil {
		people = make(chan nerResult, 1)
		go func() {
			s, err := d.ner.Find(ctx, text)
			people <- nerResult{s, err}
		}()
	}
	norm, at := fold(text)
	spans := d.local(norm)
	if at != nil {
		unfold(spans, at)
	}
	if people != nil {
		r := <-people
		if r.err != nil {
			return nil, r.err
		}
		spans = append(spans, r.spans...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	spans = Resolve(spans)
	return slices.DeleteFunc(spans, func(s Span) bool { return !want[s.Type] }), nil
}

// parallelMin is the text size from which the local detectors run on
// separate cores: below it, starting goroutines costs more than it saves.
// A variable so tests can force either path.
var parallelMin = 64 << 10

// local runs the enabled local detectors (all but Person) and returns their
// spans, overlapping and unsorted. The three groups (numeric runs; token
// runs for secrets and IBANs; emails and IPv6 by their "@" and ":") each
// make one pass over the text; on large texts they run in parallel.
func (d *Detector) local(text string) []Span {
	var groups []func([]Span) []Span
	if d.enabled[Phone] || d.enabled[SSN] || d.enabled[CreditCard] || d.enabled[IPAddress] {
		groups = append(groups, func(out []Span) []Span { return d.findNumeric(text, out) })
	}
	if d.enabled[Secret] || d.enabled[IBAN] {
		opt := tokenOptions{
			secrets:   d.enabled[Secret],
			entropy:   d.enabled[Secret] && d.entropy,
			threshold: d.entropyThreshold,
			minLen:    d.entropyMinLength,
			iban:      d.enabled[IBAN],
		}
		groups = append(groups, func(out []Span) []Span { return findTokens(text, opt, out) })
	}
	if d.enabled[Email] || d.enabled[IPAddress] {
		groups = append(groups, func(out []Span) []Span {
			if d.enabled[Email] {
				out = findEmails(text, out)
			}
			if d.enabled[IPAddress] {
				out = findIPv6(text, out)
			}
			return out
		})
	}
	// Dense text holds a span every few hundred bytes; starting near that
	// saves most of the slices' regrowth.
	hint := len(text) / 512
	if len(text) < parallelMin || len(groups) < 2 || runtime.GOMAXPROCS(0) < 2 {
		spans := make([]Span, 0, hint)
		for _, g := range groups {
			spans = g(spans)
		}
		return spans
	}
	results := make([][]Span, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() { results[i] = g(make([]Span, 0, hint)) })
	}
	wg.Wait()
	return slices.Concat(results...)
}

// Resolve sorts spans by offset and removes overlaps deterministically: among
// spans that overlap, the longest wins, then the type with the higher
// priority (Secret, Email, IBAN, CreditCard, US_SSN, IPAddress, Phone,
// Person), then the earlier start, then the higher score. Empty or inverted
// spans are dropped. spans is reordered in place.
func Resolve(spans []Span) []Span {
	spans = slices.DeleteFunc(spans, func(s Span) bool { return s.End <= s.Start || s.Start < 0 })
	if len(spans) < 2 {
		return spans
	}
	// Only the order of starts matters here: spans with equal starts
	// overlap, land in one cluster and are ranked there. The detectors emit
	// in text order, so this is mostly merging presorted runs.
	if !slices.IsSortedFunc(spans, byStart) {
		slices.SortFunc(spans, byStart)
	}
	// Overlapping spans form clusters along the text; resolution only has
	// to compare spans within a cluster, which are few. The result is
	// written over spans: it never gets ahead of the cluster being read.
	k := 0
	for i := 0; i < len(spans); {
		j, end := i+1, spans[i].End
		for j < len(spans) && spans[j].Start < end {
			end = max(end, spans[j].End)
			j++
		}
		if j == i+1 {
			spans[k] = spans[i]
			k++
		} else {
			k += copy(spans[k:], resolveCluster(spans[i:j]))
		}
		i = j
	}
	return spans[:k]
}

func byStart(a, b Span) int { return a.Start - b.Start }

// better orders a before b (negative) when a wins an overlap against b.
func better(a, b Span) int {
	if la, lb := a.End-a.Start, b.End-b.Start; la != lb {
		return lb - la
	}
	if pa, pb := priority[a.Type], priority[b.Type]; pa != pb {
		return pb - pa
	}
	if a.Start != b.Start {
		return a.Start - b.Start
	}
	switch {
	case a.Score > b.Score:
		return -1
	case a.Score < b.Score:
		return 1
	}
	if a.Type < b.Type {
		return -1
	} else if a.Type > b.Type {
		return 1
	}
	return 0
}

// resolveCluster returns the winners of a cluster in a new slice.
func resolveCluster(c []Span) []Span {
	cand := slices.Clone(c)
	slices.SortStableFunc(cand, better)
	var kept []Span
	for _, s := range cand {
		if !slices.ContainsFunc(kept, func(k Span) bool { return s.Start < k.End && k.Start < s.End }) {
			kept = append(kept, s)
		}
	}
	slices.SortFunc(kept, byStart)
	return kept
}
