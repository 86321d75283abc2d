package ranker

import (
	"errors"
	"fmt"
	"math"
)

// Options configure an Index.
type Options struct {
	// K1 controls term-frequency saturation (typical 0.9–2.0).
	K1 float64
	// B controls length normalisation, 0 (none) to 1 (full).
	B float64
	// Weights multiplies each field's term frequency; 0 ignores the field.
	Weights [NumFields]float64
	// ServerBoost adds, to each hit, this fraction of the best score among
	// the hits from the same server. Tasks usually need several tools of one
	// server (create a document, add a paragraph, save it), and a server
	// whose best tool matches the task well makes its siblings more likely
	// too. 0 turns it off. It has no effect on a catalogue with one server.
	ServerBoost float64
	// Synonyms are groups of interchangeable words; a query word of a group
	// also searches for the others, at ExpansionWeight. Task requests and
	// tool descriptions often name the same action or format differently
	// ("save" a report vs "write" a file; "xlsx" vs "Excel").
	Synonyms [][]string
	// PathExpansion are words added, at full weight, to a query that names
	// a file path: "save it to /root/notes/today.md" asks for a tool that
	// takes a file path, whatever its verb.
	PathExpansion []string
	// ExpansionWeight is the query weight of synonyms relative to the
	// user's own words (1); 0 turns synonym expansion off.
	ExpansionWeight float64
	// Analyzer configures tokenisation.
	Analyzer AnalyzerOptions
}

// DefaultOptions are the tuned defaults of the selector-embeddings plugin.
func DefaultOptions() Options {
	return Options{
		K1: 1.6,
		B:  0.75,
		Weights: [NumFields]float64{
			FieldName:              3,
			FieldServer:            1.5,
			FieldSummary:           0,
			FieldDescription:       1,
			FieldParamNames:        0.5,
			FieldParamDescriptions: 0.3,
		},
		ServerBoost:     0.4,
		Synonyms:        DefaultSynonyms(),
		PathExpansion:   []string{"file", "path"},
		ExpansionWeight: 0.7,
		Analyzer: AnalyzerOptions{
			SplitIdentifiers: true,
			Stem:             true,
			Stopwords:        true,
			ExtraStopwords:   DefaultExtraStopwords(),
			CJKBigrams:       true,
		},
	}
}

// PlainOptions is the textbook baseline the evaluation compares against:
// BM25 (k1 = 1.2, b = 0.75) over the same fields weighted equally, `\w+`
// tokens, lower case, no identifier splitting, stemming, stopwords, summary
// field or server boost.
func PlainOptions() Options {
	return Options{
		K1: 1.2,
		B:  0.75,
		Weights: [NumFields]float64{
			FieldName:              1,
			FieldServer:            1,
			FieldDescription:       1,
			FieldParamNames:        1,
			FieldParamDescriptions: 1,
		},
	}
}

// DefaultExtraStopwords are conversational words that fill task requests
// ("please help me find …") but say nothing about which tool is needed.
func DefaultExtraStopwords() []string {
	return []string{"please", "help", "want", "need", "would", "could", "like", "let", "also", "us", "via"}
}

// Validate reports the first problem with o.
func (o Options) Validate() error {
	switch {
	case math.IsNaN(o.K1) || o.K1 <= 0:
		return fmt.Errorf("k1 must be > 0, got %v", o.K1)
	case math.IsNaN(o.B) || o.B < 0 || o.B > 1:
		return fmt.Errorf("b must be within [0, 1], got %v", o.B)
	case math.IsNaN(o.ServerBoost) || o.ServerBoost < 0:
		return fmt.Errorf("server boost must be >= 0, got %v", o.ServerBoost)
	case math.IsNaN(o.ExpansionWeight) || o.ExpansionWeight < 0 || o.ExpansionWeight > 1:
		return fmt.Errorf("expansion weight must be within [0, 1], got %v", o.ExpansionWeight)
	}
	any := false
	for f, w := range o.Weights {
		if math.IsNaN(w) || w < 0 {
			return fmt.Errorf("weight of field %s must be >= 0, got %v", Field(f), w)
		}
		any = any || w > 0
	}
	if !any {
		return errors.New("at least one field weight must be > 0")
	}
	return nil
}
