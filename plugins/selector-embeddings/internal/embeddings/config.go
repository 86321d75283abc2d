package embeddings

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/plugins/selector-embeddings/internal/ranker"
)

// Config is the plugin block of cexec.hcl as the host passes it to
// Configure. Absent attributes keep the defaults of the chosen preset.
type Config struct {
	Preset           *string       `json:"preset"`
	K1               *float64      `json:"k1"`
	B                *float64      `json:"b"`
	FieldWeights     *FieldWeights `json:"field_weights"`
	SplitIdentifiers *bool         `json:"split_identifiers"`
	Stemming         *bool         `json:"stemming"`
	Stopwords        *bool         `json:"stopwords"`
	ExtraStopwords   []string      `json:"extra_stopwords"`
	CJKBigrams       *bool         `json:"cjk_bigrams"`
	ServerBoost      *float64      `json:"server_boost"`
	Synonyms         [][]string    `json:"synonyms"`
	ExpansionWeight  *float64      `json:"expansion_weight"`
	PathTerms        []string      `json:"path_terms"`
	Embeddings       *Embeddings   `json:"embeddings"`
}

// FieldWeights is the field_weights block.
type FieldWeights struct {
	Name              *float64 `json:"name"`
	Server            *float64 `json:"server"`
	Summary           *float64 `json:"summary"`
	Description       *float64 `json:"description"`
	ParamNames        *float64 `json:"param_names"`
	ParamDescriptions *float64 `json:"param_descriptions"`
}

// Embeddings is the embeddings block: an OpenAI-compatible /v1/embeddings
// endpoint (OpenAI, Azure OpenAI's v1 API, Ollama, llama.cpp server, vLLM,
// TEI).
type Embeddings struct {
	BaseURL         string   `json:"base_url"`
	Model           string   `json:"model"`
	APIKey          string   `json:"api_key"`
	Dimensions      *int     `json:"dimensions"`
	BatchSize       *int     `json:"batch_size"`
	LatencyBudgetMS *int     `json:"latency_budget_ms"`
	CacheDir        *string  `json:"cache_dir"`
	FusionWeight    *float64 `json:"fusion_weight"`
	MaxRetries      *int     `json:"max_retries"`
}

// Embedding defaults.
const (
	DefaultBatchSize       = 64
	DefaultLatencyBudgetMS = 1500
	DefaultFusionWeight    = 0.5
	DefaultMaxRetries      = 5
)

// Presets name the starting points of the lexical options.
const (
	PresetDefault   = "default"
	PresetPlainBM25 = "plain_bm25"
)

func num(desc string) pluginapi.Attribute {
	return pluginapi.Attribute{Type: "number", Description: desc}
}

func named(a pluginapi.Attribute, name string) pluginapi.Attribute {
	a.Name = name
	return a
}

// Schema is the plugin's config schema.
func Schema() pluginapi.ConfigSchema {
	return pluginapi.ConfigSchema{
		Attributes: []pluginapi.Attribute{
			{Name: "preset", Type: "string", Description: `Starting point for the lexical ranker: "default" (tuned BM25F) or "plain_bm25" (textbook BM25, no identifier splitting, stemming, stopwords or expansion). Other attributes override it.`},
			named(num("BM25 term-frequency saturation k1 (> 0; default 1.6)."), "k1"),
			named(num("BM25 length normalisation b in [0, 1] (default 0.75)."), "b"),
			{Name: "split_identifiers", Type: "bool", Description: "Split camelCase, snake_case, kebab-case and letter/digit boundaries (default true)."},
			{Name: "stemming", Type: "bool", Description: "Reduce English words to their Snowball stem (default true)."},
			{Name: "stopwords", Type: "bool", Description: "Drop English stopwords (default true)."},
			{Name: "extra_stopwords", Type: "list(string)", Description: "Words dropped besides the English stopwords (default: conversational filler such as please, help, want)."},
			{Name: "cjk_bigrams", Type: "bool", Description: "Index Chinese, Japanese and Korean text as character bigrams (default true)."},
			named(num("Fraction of the best score among a server's hits added to each of its hits (>= 0; default 0.4)."), "server_boost"),
			{Name: "synonyms", Type: "list(list(string))", Description: "Groups of interchangeable query words (default: a small built-in list of actions and office formats; [] for none)."},
			named(num("Query weight of synonyms relative to the user's words, in [0, 1] (default 0.7)."), "expansion_weight"),
			{Name: "path_terms", Type: "list(string)", Description: `Words added to a query that names a file path (default ["file", "path"]).`},
		},
		Blocks: []pluginapi.NestedBlock{
			{TypeName: "field_weights", Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
				named(num("Weight of the tool name (default 3)."), "name"),
				named(num("Weight of the server name (default 1.5)."), "server"),
				named(num("Weight of the description's first sentence, on top of the description (default 0)."), "summary"),
				named(num("Weight of the description (default 1)."), "description"),
				named(num("Weight of parameter names, nested ones included (default 0.5)."), "param_names"),
				named(num("Weight of parameter descriptions and enum values (default 0.3)."), "param_descriptions"),
			}}},
			{TypeName: "embeddings", Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
				{Name: "base_url", Type: "string", Required: true, Description: "Base URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1 or http://localhost:11434/v1."},
				{Name: "model", Type: "string", Required: true, Description: "Embedding model name."},
				{Name: "api_key", Type: "string", Sensitive: true, Description: `API key, usually env("OPENAI_API_KEY"); empty for local servers.`},
				{Name: "dimensions", Type: "number", Description: "Requested vector size, for models that support it."},
				{Name: "batch_size", Type: "number", Description: "Documents per embeddings request (default 64)."},
				{Name: "latency_budget_ms", Type: "number", Description: "Longest wait for a query embedding before searching lexically only (default 1500)."},
				{Name: "cache_dir", Type: "string", Description: "Directory of the persistent document-vector cache (default: the user cache directory's cexec/embeddings; \"\" keeps vectors in memory only)."},
				{Name: "fusion_weight", Type: "number", Description: "Weight of the embedding ranking in reciprocal rank fusion with BM25, in [0, 1] (default 0.5)."},
				{Name: "max_retries", Type: "number", Description: "Retries of a document batch on HTTP 429 and 5xx before it is retried later (default 5)."},
			}}},
		},
	}
}

// settings is a validated configuration.
type settings struct {
	lexical ranker.Options
	emb     *embSettings
}

type embSettings struct {
	baseURL      string
	model        string
	apiKey       string
	dimensions   int
	batchSize    int
	budget       time.Duration
	cacheDir     string
	fusionWeight float64
	maxRetries   int
}

// parseConfig decodes and validates raw, reporting every problem as a
// diagnostic naming its attribute.
func parseConfig(raw json.RawMessage) (settings, pluginapi.Diagnostics) {
	var c Config
	if diags := pluginapi.DecodeConfig("the selector-embeddings plugin", raw, &c); diags.HasErrors() {
		return settings{}, diags
	}
	v := &validator{}
	s := settings{lexical: v.lexical(c)}
	if c.Embeddings != nil {
		s.emb = v.embeddings(c.Embeddings)
	}
	if v.diags.HasErrors() {
		return settings{}, v.diags
	}
	return s, v.diags
}

// validator checks attributes one by one, collecting a diagnostic for each
// bad one, so that one Configure reports every mistake.
type validator struct {
	diags pluginapi.Diagnostics
}

func (v *validator) bad(attr, detail string) {
	v.diags = append(v.diags, pluginapi.Errorf(attr, "Invalid value for "+attr, detail))
}

// number sets *dst to *val when the attribute is set and within [lo, hi]
// ((lo, hi] when loOpen; hi may be +Inf).
func (v *validator) number(dst, val *float64, attr string, lo, hi float64, loOpen bool) {
	if val == nil {
		return
	}
	x := *val
	if math.IsNaN(x) || math.IsInf(x, 0) || x < lo || x > hi || (loOpen && x == lo) {
		rng := fmt.Sprintf("[%g, %g]", lo, hi)
		if loOpen {
			rng = fmt.Sprintf("(%g, %g]", lo, hi)
		}
		if math.IsInf(hi, 1) {
			rng = fmt.Sprintf(">= %g", lo)
			if loOpen {
				rng = fmt.Sprintf("> %g", lo)
			}
		}
		v.bad(attr, fmt.Sprintf("must be %s, got %g", rng, x))
		return
	}
	*dst = x
}

// integer sets *dst to *val when the attribute is set and within [lo, hi].
func (v *validator) integer(dst, val *int, attr string, lo, hi int) {
	if val == nil {
		return
	}
	if *val < lo || *val > hi {
		v.bad(attr, fmt.Sprintf("must be within [%d, %d], got %d", lo, hi, *val))
		return
	}
	*dst = *val
}

func setBool(dst, val *bool) {
	if val != nil {
		*dst = *val
	}
}

// lexical returns the ranker options c describes: its preset with the
// attributes that override it.
func (v *validator) lexical(c Config) ranker.Options {
	o := ranker.DefaultOptions()
	if c.Preset != nil {
		switch *c.Preset {
		case PresetDefault:
		case PresetPlainBM25:
			o = ranker.PlainOptions()
		default:
			v.bad("preset", fmt.Sprintf("must be %q or %q, got %q", PresetDefault, PresetPlainBM25, *c.Preset))
		}
	}
	inf := math.Inf(1)
	v.number(&o.K1, c.K1, "k1", 0, inf, true)
	v.number(&o.B, c.B, "b", 0, 1, false)
	v.number(&o.ServerBoost, c.ServerBoost, "server_boost", 0, inf, false)
	v.number(&o.ExpansionWeight, c.ExpansionWeight, "expansion_weight", 0, 1, false)
	if c.FieldWeights != nil {
		v.fieldWeights(&o.Weights, c.FieldWeights)
	}
	setBool(&o.Analyzer.SplitIdentifiers, c.SplitIdentifiers)
	setBool(&o.Analyzer.Stem, c.Stemming)
	setBool(&o.Analyzer.Stopwords, c.Stopwords)
	setBool(&o.Analyzer.CJKBigrams, c.CJKBigrams)
	if c.ExtraStopwords != nil {
		o.Analyzer.ExtraStopwords = c.ExtraStopwords
	}
	if c.Synonyms != nil {
		for i, g := range c.Synonyms {
			if len(g) < 2 {
				v.bad(fmt.Sprintf("synonyms[%d]", i), "a synonym group needs at least two words")
			}
		}
		o.Synonyms = c.Synonyms
	}
	if c.PathTerms != nil {
		o.PathExpansion = c.PathTerms
	}
	if len(v.diags) == 0 {
		if err := o.Validate(); err != nil {
			v.diags = append(v.diags, pluginapi.Errorf("", "Invalid ranker options", err.Error()))
		}
	}
	return o
}

// fieldWeights applies the field_weights block to w.
func (v *validator) fieldWeights(w *[ranker.NumFields]float64, fw *FieldWeights) {
	for f, val := range [ranker.NumFields]*float64{
		ranker.FieldName: fw.Name, ranker.FieldServer: fw.Server, ranker.FieldSummary: fw.Summary,
		ranker.FieldDescription: fw.Description, ranker.FieldParamNames: fw.ParamNames,
		ranker.FieldParamDescriptions: fw.ParamDescriptions,
	} {
		v.number(&w[f], val, "field_weights."+ranker.Field(f).String(), 0, math.Inf(1), false)
	}
	allZero := true
	for _, x := range w {
		allZero = allZero && x == 0
	}
	if allZero {
		v.bad("field_weights", "at least one field weight must be > 0")
	}
}

// embeddings returns the settings of the embeddings block.
func (v *validator) embeddings(e *Embeddings) *embSettings {
	es := &embSettings{
		baseURL: strings.TrimRight(e.BaseURL, "/"), model: e.Model, apiKey: e.APIKey,
		batchSize: DefaultBatchSize, budget: DefaultLatencyBudgetMS * time.Millisecond,
		fusionWeight: DefaultFusionWeight, maxRetries: DefaultMaxRetries,
	}
	if u, err := url.Parse(e.BaseURL); e.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.bad("embeddings.base_url", fmt.Sprintf("must be an http or https URL, got %q", e.BaseURL))
	}
	if strings.TrimSpace(e.Model) == "" {
		v.bad("embeddings.model", "must name an embedding model")
	}
	v.integer(&es.dimensions, e.Dimensions, "embeddings.dimensions", 1, 1<<16)
	v.integer(&es.batchSize, e.BatchSize, "embeddings.batch_size", 1, 2048)
	ms := DefaultLatencyBudgetMS
	v.integer(&ms, e.LatencyBudgetMS, "embeddings.latency_budget_ms", 1, 600_000)
	es.budget = time.Duration(ms) * time.Millisecond
	v.integer(&es.maxRetries, e.MaxRetries, "embeddings.max_retries", 0, 100)
	v.number(&es.fusionWeight, e.FusionWeight, "embeddings.fusion_weight", 0, 1, false)
	switch {
	case e.CacheDir == nil:
		if dir, err := os.UserCacheDir(); err == nil {
			es.cacheDir = filepath.Join(dir, "cexec", "embeddings")
		}
	case *e.CacheDir != "":
		if !filepath.IsAbs(*e.CacheDir) {
			v.bad("embeddings.cache_dir", fmt.Sprintf("must be an absolute path, got %q", *e.CacheDir))
		}
		es.cacheDir = filepath.Clean(*e.CacheDir)
	}
	return es
}
