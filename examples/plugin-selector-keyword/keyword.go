package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// version is reported in Info.
const version = "0.1.0"

// maxHitsLimit bounds max_hits.
const maxHitsLimit = 1000

// defaultStopwords are dropped from queries and documents unless the config
// sets its own list: they match almost everything and rank nothing.
var defaultStopwords = []string{
	"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into",
	"is", "it", "of", "on", "or", "that", "the", "this", "to", "with",
}

// defaultStopSet is defaultStopwords as a set, for use before Configure.
var defaultStopSet = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range defaultStopwords {
		m[w] = true
	}
	return m
}()

// schema is the plugin-specific part of its plugin block in cexec.hcl.
var schema = pluginapi.ConfigSchema{
	Attributes: []pluginapi.Attribute{
		{Name: "max_hits", Type: "number", Required: true, Description: "Most hits a search returns (1 to 1000)."},
		{Name: "case_sensitive", Type: "bool", Description: "Match keywords case-sensitively (default false)."},
		{Name: "stopwords", Type: "list(string)", Description: "Words to ignore; replaces the built-in English list."},
	},
}

// config is the validated configuration.
type config struct {
	maxHits       int
	caseSensitive bool
	stopwords     map[string]bool
}

// indexed is a document with its keywords under the current config.
type indexed struct {
	doc  selector.Document
	name map[string]bool
	desc map[string]bool
}

// keywordSelector implements selector.Selector.
type keywordSelector struct {
	log hclog.Logger

	mu   sync.RWMutex
	cfg  *config // nil until Configure succeeds
	docs map[string]*indexed
}

func newKeywordSelector(log hclog.Logger) *keywordSelector {
	return &keywordSelector{log: log, docs: map[string]*indexed{}}
}

// Info describes the plugin and its config schema.
func (s *keywordSelector) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         "keyword",
		Kind:         pluginapi.KindSelector,
		Version:      version,
		APIVersions:  []string{selector.APIVersion},
		ConfigSchema: schema,
	}, nil
}

// rawConfig mirrors schema; pointers tell "unset" (JSON null or absent) from
// zero values.
type rawConfig struct {
	MaxHits       *float64  `json:"max_hits"`
	CaseSensitive *bool     `json:"case_sensitive"`
	Stopwords     *[]string `json:"stopwords"`
}

// Configure validates the config block and, when it is valid, applies it
// and re-tokenizes the index (case sensitivity and stopwords change keys).
func (s *keywordSelector) Configure(_ context.Context, raw json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindSelector, []string{selector.APIVersion}, apiVersion); diags.HasErrors() {
		return diags, nil
	}
	cfg, diags := parseConfig(raw)
	if diags.HasErrors() {
		return diags, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg
	for _, d := range s.docs {
		s.tokenizeDoc(d)
	}
	s.log.Info("configured", "max_hits", cfg.maxHits, "case_sensitive", cfg.caseSensitive, "stopwords", len(cfg.stopwords))
	return diags, nil
}

func parseConfig(raw json.RawMessage) (*config, pluginapi.Diagnostics) {
	var rc rawConfig
	if diags := pluginapi.DecodeConfig("the keyword selector", raw, &rc); diags.HasErrors() {
		return nil, diags
	}
	cfg := &config{stopwords: map[string]bool{}}
	var diags pluginapi.Diagnostics
	switch {
	case rc.MaxHits == nil:
		diags = append(diags, pluginapi.Errorf("max_hits", "missing max_hits", "max_hits is required: the most hits a search returns, 1 to 1000"))
	case *rc.MaxHits != math.Trunc(*rc.MaxHits) || *rc.MaxHits < 1 || *rc.MaxHits > maxHitsLimit:
		diags = append(diags, pluginapi.Errorf("max_hits", "max_hits out of range",
			fmt.Sprintf("max_hits must be a whole number from 1 to %d, got %v", maxHitsLimit, *rc.MaxHits)))
	default:
		cfg.maxHits = int(*rc.MaxHits)
	}
	if rc.CaseSensitive != nil {
		cfg.caseSensitive = *rc.CaseSensitive
	}
	words := defaultStopwords
	if rc.Stopwords != nil {
		words = *rc.Stopwords
	}
	for _, w := range words {
		for _, t := range tokenize(w, cfg.caseSensitive) {
			cfg.stopwords[t] = true
		}
	}
	return cfg, diags
}

// Index applies upserts and deletes. Documents without an ID are skipped with
// a warning rather than failing the whole batch.
func (s *keywordSelector) Index(_ context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Reset {
		s.docs = map[string]*indexed{}
	}
	for _, id := range req.Deletes {
		delete(s.docs, id)
	}
	var diags pluginapi.Diagnostics
	for _, d := range req.Upserts {
		if d.ID == "" {
			diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning,
				Summary: "document without id skipped", Detail: "name: " + d.Name})
			continue
		}
		x := &indexed{doc: d}
		s.tokenizeDoc(x)
		s.docs[d.ID] = x
	}
	return selector.IndexResponse{Documents: int64(len(s.docs)), Diagnostics: diags}, nil
}

// Search scores each document by the query keywords it contains: 2 points
// for a keyword in the name, 1 for one only in the description, normalized
// to 0..1. Ties go to the smaller ID so results are stable.
func (s *keywordSelector) Search(_ context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cfg == nil {
		return selector.SearchResponse{}, fmt.Errorf("search before configure: %w", pluginapi.ErrUnavailable)
	}
	terms := s.keywords(req.Query)
	if len(terms) == 0 {
		return selector.SearchResponse{Diagnostics: pluginapi.Diagnostics{{
			Severity: pluginapi.SeverityWarning, Summary: "query has no keywords",
			Detail: "every word of the query is a stopword or punctuation",
		}}}, nil
	}
	limit := s.cfg.maxHits
	if req.Limit > 0 && req.Limit < limit {
		limit = req.Limit
	}
	var hits []selector.Hit
	for id, d := range s.docs {
		if len(req.Servers) > 0 && !slices.Contains(req.Servers, d.doc.Server) {
			continue
		}
		if len(req.Kinds) > 0 && !slices.Contains(req.Kinds, d.doc.Kind) {
			continue
		}
		points := 0
		for t := range terms {
			switch {
			case d.name[t]:
				points += 2
			case d.desc[t]:
				points++
			}
		}
		if points > 0 {
			hits = append(hits, selector.Hit{ID: id, Score: float64(points) / float64(2*len(terms))})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return selector.SearchResponse{Hits: hits}, nil
}

// tokenizeDoc computes d's keywords under the current config. Callers hold
// s.mu for writing.
func (s *keywordSelector) tokenizeDoc(d *indexed) {
	d.name = s.keywords(d.doc.Name)
	d.desc = s.keywords(d.doc.Description)
}

// keywords is the set of tokens of text that are not stopwords. Before
// Configure it folds case and drops the default stopwords.
func (s *keywordSelector) keywords(text string) map[string]bool {
	caseSensitive, stop := false, defaultStopSet
	if s.cfg != nil {
		caseSensitive, stop = s.cfg.caseSensitive, s.cfg.stopwords
	}
	out := map[string]bool{}
	for _, t := range tokenize(text, caseSensitive) {
		if !stop[t] {
			out[t] = true
		}
	}
	return out
}

// tokenize splits text into words at anything that is not a letter or digit
// and at lower-to-upper case changes, so "read_file", "read-file" and
// "readFile" all yield "read" and "file".
func tokenize(text string, caseSensitive bool) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			w := string(cur)
			if !caseSensitive {
				w = strings.ToLower(w)
			}
			words = append(words, w)
			cur = cur[:0]
		}
	}
	for _, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 && unicode.IsLower(cur[len(cur)-1]) {
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return words
}
