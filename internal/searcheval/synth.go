package searcheval

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/cexec/cexec/pluginapi/selector"
)

// Synthesize returns n tool documents made by varying base, for scale
// benchmarks. The first len(base) are base itself; each later round copies
// every base tool under a new server name ("<server>-<word><round>") with a
// perturbed description: about one word in seven swapped for a word drawn
// from the whole catalogue, and often the first sentence of another tool
// appended. So postings lists, vocabulary and server count grow roughly as
// they would in a real large catalogue, instead of n exact duplicates. The
// result depends only on base, n and seed.
func Synthesize(base []selector.Document, n int, seed uint64) []selector.Document {
	if len(base) == 0 || n <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var vocab []string
	seen := map[string]bool{}
	var sentences []string
	for _, d := range base {
		for _, w := range strings.Fields(d.Description) {
			if !seen[w] {
				seen[w] = true
				vocab = append(vocab, w)
			}
		}
		if s := firstSentence(d.Description); s != "" {
			sentences = append(sentences, s)
		}
	}
	if len(vocab) == 0 {
		vocab = []string{"tool"}
	}
	out := make([]selector.Document, 0, n)
	for i := 0; i < n; i++ {
		b := base[i%len(base)]
		round := i / len(base)
		if round == 0 {
			out = append(out, b)
			continue
		}
		server := fmt.Sprintf("%s-%s%d", b.Server, strings.ToLower(strings.Trim(vocab[(round*7919)%len(vocab)], ".,:;()\"'")), round)
		words := strings.Fields(b.Description)
		for j := range words {
			if rng.IntN(7) == 0 {
				words[j] = vocab[rng.IntN(len(vocab))]
			}
		}
		desc := strings.Join(words, " ")
		if len(sentences) > 0 && rng.IntN(2) == 0 {
			desc += " " + sentences[rng.IntN(len(sentences))] + "."
		}
		out = append(out, ToolDocument(server, b.Name, desc, b.InputSchema))
	}
	return out
}

// firstSentence is the description up to its first ". ".
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// Corpus pools the tools (each id once) and query texts of several datasets,
// the material Synthesize and the scale benchmark work from.
func Corpus(sets []*Dataset) (tools []selector.Document, queries []string) {
	seen := map[string]bool{}
	for _, ds := range sets {
		for _, t := range ds.Tools {
			if !seen[t.ID] {
				seen[t.ID] = true
				tools = append(tools, t)
			}
		}
		for _, q := range ds.Queries {
			queries = append(queries, q.Text)
		}
	}
	return tools, queries
}
