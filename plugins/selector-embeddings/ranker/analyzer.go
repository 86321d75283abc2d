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

	// stems caches Snowball results: stemming costs about a microsecond
	// per word, and catalogue vocabularies are small and repetitive.
	mu    sync.RWMutex
	stems map[string]string
}

// maxStemCache bounds the stem cache; past it the cache starts over rather
// than growing without limit on adversarial input.
const maxStemCache = 1 << 18

// NewAnalyzer returns an analyzer for opts.
func NewAnalyzer(opts AnalyzerOptions) *Analyzer {
	a := &Analyzer{opts: opts, extra: map[string]struct{}{}, stems: map[string]string{}}
	for _, w := range opts.ExtraStopwords {
		a.extra[strings.ToLower(w)] = struct{}{}
	}
	return a
}

// Options returns the options the analyzer was built with.
func (a *Analyzer) Options() AnalyzerOptions { return a.opts }

// Analyze appends the terms of text to dst and returns it.
func (a *Analyzer) Analyze(dst []string, text string) []string {
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case isCJK(r):
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if !isCJK(r2) {
					break
				}
				j += s2
			}
			dst = a.cjk(dst, text[i:j])
			i = j
		case isWordRune(r, !a.opts.SplitIdentifiers):
			j := i
			for j < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if isCJK(r2) || !isWordRune(r2, !a.opts.SplitIdentifiers) {
					break
				}
				j += s2
			}
			if a.opts.SplitIdentifiers {
				dst = a.split(dst, text[i:j])
			} else {
				dst = a.emit(dst, strings.ToLower(text[i:j]))
			}
			i = j
		default:
			i += size
		}
	}
	return dst
}

// isWordRune reports whether r belongs to a word; underscore joins words
// only when identifiers are not split.
func isWordRune(r rune, underscore bool) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || (underscore && r == '_')
}

// isCJK reports whether r is a Han, Hiragana, Katakana or Hangul character.
func isCJK(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

func (a *Analyzer) cjk(dst []string, run string) []string {
	if !a.opts.CJKBigrams {
		return append(dst, run)
	}
	if utf8.RuneCountInString(run) == 1 {
		return append(dst, run)
	}
	prev := 0
	_, s := utf8.DecodeRuneInString(run)
	cur := s
	for cur < len(run) {
		_, s2 := utf8.DecodeRuneInString(run[cur:])
		dst = append(dst, run[prev:cur+s2])
		prev = cur
		cur += s2
	}
	return dst
}

// split breaks one word (letters and digits only) at camelCase and
// letter/digit boundaries: "HTTPServer" → HTTP, Server; "mp3" → mp, 3.
func (a *Analyzer) split(dst []string, word string) []string {
	start := 0
	parts := 0
	var prev rune
	for i, r := range word {
		if i > 0 && boundary(prev, r, word[i+utf8.RuneLen(r):]) {
			dst = a.emit(dst, strings.ToLower(word[start:i]))
			start = i
			parts++
		}
		prev = r
	}
	dst = a.emit(dst, strings.ToLower(word[start:]))
	if parts > 0 {
		dst = a.emit(dst, strings.ToLower(word))
	}
	return dst
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

// emit applies stopwords and stemming to one lower-case token.
func (a *Analyzer) emit(dst []string, tok string) []string {
	if tok == "" {
		return dst
	}
	// Single Latin letters left over from splitting ("v2", "x_axis") carry
	// no meaning; single digits and CJK characters do.
	if len(tok) == 1 && tok[0] >= 'a' && tok[0] <= 'z' {
		return dst
	}
	if a.opts.Stopwords {
		if english.IsStopWord(tok) {
			return dst
		}
		if _, ok := a.extra[tok]; ok {
			return dst
		}
	}
	if a.opts.Stem {
		tok = a.stem(tok)
	}
	return append(dst, tok)
}

func (a *Analyzer) stem(tok string) string {
	a.mu.RLock()
	s, ok := a.stems[tok]
	a.mu.RUnlock()
	if ok {
		return s
	}
	s = tok
	if stemmable(tok) {
		s = english.Stem(tok, true)
	}
	a.mu.Lock()
	if len(a.stems) >= maxStemCache {
		a.stems = map[string]string{}
	}
	a.stems[tok] = s
	a.mu.Unlock()
	return s
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
