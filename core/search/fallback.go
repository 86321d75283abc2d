package search

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
)

// stopwords are query words that say nothing about a tool; without them
// "read a file" would match every description holding an "a".
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "any": true, "are": true, "as": true, "at": true, "be": true,
	"by": true, "do": true, "for": true, "from": true, "how": true, "i": true, "in": true, "into": true,
	"is": true, "it": true, "its": true, "me": true, "my": true, "of": true, "on": true, "or": true,
	"some": true, "that": true, "the": true, "this": true, "to": true, "use": true, "using": true,
	"want": true, "what": true, "with": true,
}

// words lowercases s and splits it into words at anything that is not a
// letter or digit, dropping stopwords.
func words(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if !stopwords[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// Weights of the substring match: a query word in the tool's name counts
// more than one in its server or description.
const (
	nameWeight   = 3
	serverWeight = 1
	descWeight   = 1
)

// fallback is the search without a selector: each query word found as a
// substring of a document's name, server or description adds its field's
// weight; ties go to the shorter name, then the id.
func (s *Service) fallback(req Request) []ranked {
	terms := words(req.Query)
	if len(terms) == 0 {
		return nil
	}
	type cand struct {
		ranked
		nameLen int
	}
	var cands []cand
	consider := func(id, kind, server, name, desc string) {
		if len(req.Servers) > 0 && !slices.Contains(req.Servers, server) {
			return
		}
		if len(req.Kinds) > 0 && !slices.Contains(req.Kinds, kind) {
			return
		}
		name, server, desc = strings.ToLower(name), strings.ToLower(server), strings.ToLower(desc)
		score := 0
		for _, t := range terms {
			if strings.Contains(name, t) {
				score += nameWeight
			}
			if strings.Contains(server, t) {
				score += serverWeight
			}
			if strings.Contains(desc, t) {
				score += descWeight
			}
		}
		if score > 0 {
			cands = append(cands, cand{ranked{id: id, score: float64(score)}, len(name)})
		}
	}
	for _, t := range s.o.Catalog.Tools() {
		consider(t.ID, KindTool, t.Server, t.Name, description(t))
	}
	s.mu.RLock()
	for _, sk := range s.skills {
		consider(SkillsServer+"/"+sk.Name, KindSkill, SkillsServer, sk.Name, sk.Description)
	}
	s.mu.RUnlock()
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.nameLen, b.nameLen), strings.Compare(a.id, b.id))
	})
	out := make([]ranked, 0, min(len(cands), req.Limit))
	for _, c := range cands[:min(len(cands), req.Limit)] {
		out = append(out, c.ranked)
	}
	return out
}
