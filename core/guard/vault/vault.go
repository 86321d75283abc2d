package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/cexec/cexec/pluginapi/guard"
)

// ErrClosed is returned by the methods of a Vault after Close.
var ErrClosed = errors.New("vault is closed")

// Vault is one user's handle on a session's vault. Handles of the same
// session share one state, so they agree on every token; each handle has
// its own Detector. A Vault is safe for concurrent use.
type Vault struct {
	store  *Store
	st     *state
	det    Detector
	closed atomic.Bool
}

// Close releases the handle. It is idempotent. The vault stays on disk.
func (v *Vault) Close() error {
	if !v.closed.Swap(true) {
		v.store.release(v.st)
	}
	return nil
}

// Len returns the number of values in the vault.
func (v *Vault) Len() int {
	v.st.mu.RLock()
	defer v.st.mu.RUnlock()
	return len(v.st.entries)
}

func (v *Vault) check() error {
	if v.closed.Load() {
		return fmt.Errorf("vault %s/%s: %w", v.st.tenant, v.st.session, ErrClosed)
	}
	return nil
}

// Tokenize replaces every value the detector finds in text with its token,
// issuing tokens for new values and saving the vault before it returns, so
// a token the caller passes on can always be restored. Text that already
// looks like a token is left alone when the vault never issued it (and it
// is reserved, so the vault never will), and replaced by a LITERAL token
// when the vault did issue it, so Untokenize(Tokenize(s)) == s for every
// s, up to the spelling of values that normalize alike. Bytes that are
// not UTF-8 (a program printing Latin-1) come back as U+FFFD, as a JSON
// reader would see them. A detector error fails the call: the caller must
// not pass text on untokenized.
func (v *Vault) Tokenize(ctx context.Context, text string) (string, error) {
	out, err := v.tokenize(ctx, []string{text})
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// span is a detected value within one segment, or (literal set)
// token-shaped text found in it.
type span struct {
	start, end int
	typ        string
	literal    bool
}

// tokenize tokenizes several texts with one detector call: they are
// joined with newlines, and spans that cross a join are cut at it (each
// piece is a value of its own, so nothing is left in the clear).
func (v *Vault) tokenize(ctx context.Context, segs []string) ([]string, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	segs = validUTF8(segs)
	text, offs := joinSegments(segs)
	var found []span
	if v.det != nil && text != "" {
		raw, err := v.det.Detect(ctx, guard.DetectRequest{Text: text, Types: v.store.opts.Types})
		if err != nil {
			return nil, fmt.Errorf("vault %s/%s: detect: %w", v.st.tenant, v.st.session, err)
		}
		found = mergeSpans(text, raw)
		// The session's own id is cexec's identifier, which the model
		// holds already and must be able to pass back; random ids look
		// like secrets to an entropy detector.
		found = slices.DeleteFunc(found, func(s span) bool { return text[s.start:s.end] == v.st.session })
	}
	if len(found) == 0 && strings.IndexByte(text, '[') < 0 {
		return segs, nil
	}
	perSeg := splitSpans(found, segs, offs)

	// Token-shaped text outside the spans; the spans' own bytes go to
	// the vault whatever they contain.
	literals := make([][]span, len(segs))
	for i, s := range segs {
		sp := perSeg[i]
		k := 0
		forEachToken(s, func(start, end int) {
			for k < len(sp) && sp[k].end <= start {
				k++
			}
			if k < len(sp) && sp[k].start < end {
				return
			}
			literals[i] = append(literals[i], span{start: start, end: end, literal: true})
		})
	}

	st := v.st
	st.mu.Lock()
	// Reserve first, so no token issued below equals text in the input.
	var err error
	for i, lits := range literals {
		for _, l := range lits {
			if tok := segs[i][l.start:l.end]; err == nil && !st.isIssued(tok) {
				err = st.reserve(tok)
			}
		}
	}
	out := make([]string, len(segs))
	for i, s := range segs {
		if err != nil {
			break
		}
		out[i], err = st.rewrite(s, perSeg[i], literals[i])
	}
	var data []byte
	var gen uint64
	// Save this call's changes, and any an earlier failed save left
	// behind: a token in out must be restorable after a crash.
	if err == nil && st.unsaved() {
		data, gen, err = st.snapshot()
	}
	st.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if data != nil {
		if err := st.persist(data, gen); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isIssued reports whether the vault issued tok. The caller holds st.mu.
func (st *state) isIssued(tok string) bool {
	_, ok := st.byToken[tok]
	return ok
}

// rewrite builds the tokenized form of s from its value spans and its
// token-shaped literals (both sorted, disjoint). The caller holds st.mu
// for writing.
func (st *state) rewrite(s string, spans, literals []span) (string, error) {
	if len(spans) == 0 && len(literals) == 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	emit := func(sp span) error {
		val := s[sp.start:sp.end]
		var tok string
		switch {
		case !sp.literal:
			var err error
			if tok, err = st.tokenFor(sp.typ, val); err != nil {
				return err
			}
		case st.isIssued(val):
			// The text is a live token: pass it on as a value of its
			// own, or Untokenize would turn it into another value.
			var err error
			if tok, err = st.tokenFor(literalType, val); err != nil {
				return err
			}
		default:
			return nil // reserved, left as it is
		}
		b.WriteString(s[last:sp.start])
		b.WriteString(tok)
		last = sp.end
		return nil
	}
	i, j := 0, 0
	for i < len(spans) || j < len(literals) {
		var err error
		if j == len(literals) || i < len(spans) && spans[i].start < literals[j].start {
			err = emit(spans[i])
			i++
		} else {
			err = emit(literals[j])
			j++
		}
		if err != nil {
			return "", err
		}
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

func joinSegments(segs []string) (string, []int) {
	offs := make([]int, len(segs))
	if len(segs) == 1 {
		return segs[0], offs
	}
	n := 0
	for _, s := range segs {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('\n')
		}
		offs[i] = b.Len()
		b.WriteString(s)
	}
	return b.String(), offs
}

// mergeSpans checks the detector's spans against text and makes them
// disjoint. Offsets are clamped to the text and widened to whole UTF-8
// characters; overlapping spans (several guards may report the same value
// differently) merge into one covering both, typed after the longest, so
// no byte any guard flagged is left in the clear.
func mergeSpans(text string, raw []guard.Span) []span {
	spans := make([]span, 0, len(raw))
	types := map[string]string{}
	for _, r := range raw {
		start, end := max(r.Start, 0), min(r.End, len(text))
		if start >= end {
			continue
		}
		for start > 0 && !utf8.RuneStart(text[start]) {
			start--
		}
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		t, ok := types[r.Type]
		if !ok {
			t = tokenType(r.Type)
			types[r.Type] = t
		}
		spans = append(spans, span{start: start, end: end, typ: t})
	}
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	out := spans[:1]
	longest := spans[0].end - spans[0].start
	for _, s := range spans[1:] {
		cur := &out[len(out)-1]
		if s.start >= cur.end {
			out = append(out, s)
			longest = s.end - s.start
			continue
		}
		if s.end-s.start > longest {
			cur.typ, longest = s.typ, s.end-s.start
		}
		cur.end = max(cur.end, s.end)
	}
	return out
}

// splitSpans assigns spans of the joined text to the segments, relative to
// each segment, cutting spans that cross a join.
func splitSpans(spans []span, segs []string, offs []int) [][]span {
	per := make([][]span, len(segs))
	if len(spans) == 0 {
		return per
	}
	k := 0
	for i, s := range segs {
		lo, hi := offs[i], offs[i]+len(s)
		for k > 0 && spans[k-1].end > lo {
			k-- // a span may continue from the previous segment
		}
		for ; k < len(spans) && spans[k].start < hi; k++ {
			a, b := max(spans[k].start, lo), min(spans[k].end, hi)
			if a < b {
				per[i] = append(per[i], span{start: a - lo, end: b - lo, typ: spans[k].typ})
			}
		}
	}
	return per
}

// validUTF8 returns segs with each byte that is not part of a UTF-8
// character replaced by U+FFFD, one for one as Go's JSON decoder does
// (strings.ToValidUTF8 would fold a run into one, and a JSON value would
// no longer read back as it was), copying only when one has any: the
// detector's request is a protobuf string, which must be UTF-8, and what
// the model reads is JSON.
func validUTF8(segs []string) []string {
	for i, s := range segs {
		if utf8.ValidString(s) {
			continue
		}
		out := slices.Clone(segs)
		for j := i; j < len(out); j++ {
			out[j] = string([]rune(out[j]))
		}
		return out
	}
	return segs
}
