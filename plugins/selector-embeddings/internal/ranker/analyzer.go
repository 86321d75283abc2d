package ranker

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// AnalyzerOptions say how text becomes index terms. The same analyzer runs
// over documents and queries, so a query term can only match a document term
// produced by the same steps.
type AnalyzerOptions struct {
	// SplitIdentifiers breaks identifiers at snake_case, kebab-case,
	// camelCase and letter/digit boundaries ("getStockPrice2" → get, stock,
	// price, 2) and also keeps the joined form of camelCase/digit words
	// ("PowerPoint" → power, point, powerpoint) so a query that writes the
	// word joined still matches. Off, a word is a run of letters, digits and
	// underscores, as in the common `\w+` tokenizer.
	SplitIdentifiers bool
	// Stem reduces English words to their Snowball (Porter2) stem.
	Stem bool
	// Stopwords drops the Snowball English stopword list plus ExtraStopwords.
	Stopwords bool
	// ExtraStopwords are dropped too when Stopwords is on (lower case).
	ExtraStopwords []string
	// CJKBigrams indexes runs of Chinese, Japanese and Korean characters as
	// overlapping character bigrams (single characters as unigrams), the
	// usual way to search unsegmented CJK text. Off, a CJK run is one token.
	CJKBigrams bool
}

// Analyzer turns text into terms. It is safe for concurrent use.
type Analyzer struct {
	opts  AnalyzerOptions
	extra map[string]struct{}

	// terms caches token → term (after stopwords and stemming; "" when
	// dropped) when stemming is on: stemming costs about a microsecond per
	// word, and catalogue vocabularies are small and repetitive.
	mu    sync.RWMutex
	terms map[string]string
}

// maxTermCache bounds the shared cache; past it the cache starts over
// rather than growing without limit on adversarial input.
const maxTermCache = 1 << 18

// NewAnalyzer returns an analyzer for opts.
func NewAnalyzer(opts AnalyzerOptions) *Analyzer {
	a := &Analyzer{opts: opts, extra: map[string]struct{}{}, terms: map[string]string{}}
	for _, w := range opts.ExtraStopwords {
		a.extra[strings.ToLower(w)] = struct{}{}
	}
	return a
}

// Options returns the options the analyzer was built with.
func (a *Analyzer) Options() AnalyzerOptions { return a.opts }

// Analyze appends the terms of text to dst and returns it.
func (a *Analyzer) Analyze(dst []string, text string) []string {
	a.tokens(text, func(tok string) {
		if t := a.term(tok); t != "" {
			dst = append(dst, t)
		}
	})
	return dst
}

// tokens calls fn with each lower-case token of text, before stopwords and
// stemming (see term). Tokens may point into text.
func (a *Analyzer) tokens(text string, fn func(tok string)) {
	underscore := !a.opts.SplitIdentifiers
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case isCJK(r):
			j := i + size
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if !isCJK(r2) {
					break
				}
				j += s2
			}
			a.cjk(text[i:j], fn)
			i = j
		case isWordRune(r, underscore):
			j := i + size
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if isCJK(r2) || !isWordRune(r2, underscore) {
					break
				}
				j += s2
			}
			if a.opts.SplitIdentifiers {
				split(text[i:j], fn)
			} else {
				emit(strings.ToLower(text[i:j]), fn)
			}
			i = j
		default:
			i += size
		}
	}
}

// isWordRune reports whether r belongs to a word; underscore joins words
// only when identifiers are not split.
func isWordRune(r rune, underscore bool) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || (underscore && r == '_')
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// isCJK reports whether r is a Han, Hiragana, Katakana or Hangul character.
func isCJK(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

func (a *Analyzer) cjk(run string, fn func(string)) {
	if !a.opts.CJKBigrams || utf8.RuneCountInString(run) == 1 {
		fn(run)
		return
	}
	prev := 0
	_, cur := utf8.DecodeRuneInString(run)
	for cur < len(run) {
		_, s2 := utf8.DecodeRuneInString(run[cur:])
		fn(run[prev : cur+s2])
		prev = cur
		cur += s2
	}
}

// split breaks one word (letters and digits only) at camelCase and
// letter/digit boundaries: "HTTPServer" → HTTP, Server; "mp3" → mp, 3. A
// word that splits also yields its joined form.
func split(word string, fn func(string)) {
	start := 0
	parts := 0
	var prev rune
	for i, r := range word {
		if i > 0 && boundary(prev, r, word[i+utf8.RuneLen(r):]) {
			emit(strings.ToLower(word[start:i]), fn)
			start = i
			parts++
		}
		prev = r
	}
	emit(strings.ToLower(word[start:]), fn)
	if parts > 0 {
		emit(strings.ToLower(word), fn)
	}
}

// boundary reports whether a word splits between prev and r; rest is the text
// after r, needed for acronyms ("HTTPServer": the split falls before the S
// because the r after it is lower case).
func boundary(prev, r rune, rest string) bool {
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(r):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(r):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(r):
		next, _ := utf8.DecodeRuneInString(rest)
		return next != utf8.RuneError && unicode.IsLower(next)
	}
	return false
}

// emit passes on a token unless it is a single Latin letter: those are
// left over from splitting ("v2", "x_axis") and carry no meaning; single
// digits and CJK characters do.
func emit(tok string, fn func(string)) {
	if tok == "" || len(tok) == 1 && tok[0] >= 'a' && tok[0] <= 'z' {
		return
	}
	fn(tok)
}

// term applies stopwords and stemming to a token: "" means dropped. The
// result never points into the analysed text when stemming is on (it comes
// from the cache); callers that keep it otherwise must clone it.
func (a *Analyzer) term(tok string) string {
	if !a.opts.Stem {
		if a.stopword(tok) {
			return ""
		}
		return tok
	}
	a.mu.RLock()
	t, ok := a.terms[tok]
	a.mu.RUnlock()
	if ok {
		return t
	}
	switch {
	case a.stopword(tok):
		t = ""
	case stemmable(tok):
		t = english.Stem(tok, true)
	default:
		// tok may point into a long description; the cache must not keep
		// that alive.
		t = strings.Clone(tok)
	}
	a.mu.Lock()
	if len(a.terms) >= maxTermCache {
		a.terms = map[string]string{}
	}
	a.terms[strings.Clone(tok)] = t
	a.mu.Unlock()
	return t
}

func (a *Analyzer) stopword(tok string) bool {
	if !a.opts.Stopwords {
		return false
	}
	if english.IsStopWord(tok) {
		return true
	}
	_, ok := a.extra[tok]
	return ok
}

// stemmable reports whether tok is a plain ASCII word; the English stemmer
// would mangle numbers, identifiers with digits and other scripts.
func stemmable(tok string) bool {
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
