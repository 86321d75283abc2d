package search

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// keywordIndex is a stand-in selector plugin: it ranks documents by how
// many of the query's words their server, name and description hold. These
// tests are about what the search service does around a selector; the
// selector plugins' own tests cover ranking.
type keywordIndex struct {
	mu   sync.Mutex
	docs map[string]selector.Document
}

func newKeywordIndex() *keywordIndex {
	return &keywordIndex{docs: map[string]selector.Document{}}
}

func (k *keywordIndex) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "keyword", Kind: pluginapi.KindSelector, Version: "0", APIVersions: []string{selector.APIVersion}}, nil
}

func (k *keywordIndex) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (k *keywordIndex) Index(_ context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if req.Reset {
		clear(k.docs)
	}
	for _, id := range req.Deletes {
		delete(k.docs, id)
	}
	for _, d := range req.Upserts {
		k.docs[d.ID] = d
	}
	return selector.IndexResponse{Documents: int64(len(k.docs))}, nil
}

func (k *keywordIndex) Search(_ context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	query := keywords(req.Query)
	var hits []selector.Hit
	for id, d := range k.docs {
		if (len(req.Servers) > 0 && !slices.Contains(req.Servers, d.Server)) ||
			(len(req.Kinds) > 0 && !slices.Contains(req.Kinds, d.Kind)) {
			continue
		}
		words := keywords(d.Server + " " + d.Name + " " + d.Description)
		score := 0
		for _, w := range query {
			if slices.Contains(words, w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, selector.Hit{ID: id, Score: float64(score)})
		}
	}
	slices.SortFunc(hits, func(a, b selector.Hit) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.ID, b.ID))
	})
	if req.Limit > 0 && len(hits) > req.Limit {
		hits = hits[:req.Limit]
	}
	return selector.SearchResponse{Hits: hits}, nil
}

var stopWords = []string{"a", "an", "and", "for", "in", "of", "the", "to", "with"}

// keywords splits s into lower-case words at anything but letters and
// digits (so at the underscores of identifiers), without stop words.
func keywords(s string) []string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	return slices.DeleteFunc(words, func(w string) bool { return slices.Contains(stopWords, w) })
}
