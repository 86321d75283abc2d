package ranker

import (
	"strings"
	"unicode"
)

// queryTerm is an analysed query term with its weight: 1 for terms the user
// wrote, Options.ExpansionWeight for terms added by expansion.
type queryTerm struct {
	term   string
	weight float32
}

// expander adds related terms to queries.
type expander struct {
	related map[string][]string // analysed term → analysed group members
	path    []string            // analysed terms added for file paths
}

func newExpander(an *Analyzer, o Options) *expander {
	e := &expander{related: map[string][]string{}}
	for _, group := range o.Synonyms {
		var terms []string
		for _, w := range group {
			for _, t := range an.Analyze(nil, w) {
				if !contains(terms, t) {
					terms = append(terms, t)
				}
			}
		}
		for _, t := range terms {
			for _, u := range terms {
				if u != t && !contains(e.related[t], u) {
					e.related[t] = append(e.related[t], u)
				}
			}
		}
	}
	for _, w := range o.PathExpansion {
		e.path = an.Analyze(e.path, w)
	}
	return e
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// expand appends to dst the query's own terms (weight 1), the terms related
// to them (weight w, skipped when w is 0) and, when the query names a file
// path, the path terms (weight 1: the query really is about a file).
func (e *expander) expand(dst []queryTerm, query string, toks []string, w float32) []queryTerm {
	add := func(t string, weight float32) {
		for i := range dst {
			if dst[i].term == t {
				dst[i].weight = max(dst[i].weight, weight)
				return
			}
		}
		dst = append(dst, queryTerm{term: t, weight: weight})
	}
	for _, t := range toks {
		add(t, 1)
	}
	n := len(dst)
	for i := 0; i < n && w > 0; i++ {
		for _, r := range e.related[dst[i].term] {
			add(r, w)
		}
	}
	if len(e.path) > 0 && mentionsPath(query) {
		for _, t := range e.path {
			add(t, 1)
		}
	}
	return dst
}

// mentionsPath reports whether the query names a file or directory path:
// a word starting with "/", "~/" or "./", or a slash-separated word whose
// last element has an extension ("docs/report.md").
func mentionsPath(query string) bool {
	for _, f := range strings.Fields(query) {
		f = strings.TrimFunc(f, func(r rune) bool {
			return unicode.IsPunct(r) && r != '/' && r != '~' && r != '.' && r != '_'
		})
		f = strings.TrimRight(f, ".")
		if len(f) < 2 || strings.Contains(f, "://") {
			continue
		}
		if strings.HasPrefix(f, "/") || strings.HasPrefix(f, "~/") || strings.HasPrefix(f, "./") {
			return true
		}
		if i := strings.LastIndexByte(f, '/'); i > 0 {
			base := f[i+1:]
			if j := strings.LastIndexByte(base, '.'); j > 0 && j < len(base)-1 {
				return true
			}
		}
	}
	return false
}
