package ranker

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

func newIndex(t *testing.T, o Options) *Index {
	t.Helper()
	ix, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// nameOnly scores the name field alone with a bare analyzer, so expected
// scores can be worked out by hand.
func nameOnly() Options {
	return Options{K1: 1.2, B: 0.75, Weights: [NumFields]float64{FieldName: 1}}
}

func TestScoreMatchesBM25ByHand(t *testing.T) {
	ix := newIndex(t, nameOnly())
	ix.Apply([]Doc{{ID: "a", Name: "alpha beta"}, {ID: "b", Name: "alpha"}}, nil, false)
	hits := ix.Search("beta", 10, Filter{})
	// N=2, df(beta)=1: idf = ln(1 + 1.5/1.5) = ln 2. Doc a: len 2, avglen
	// 1.5, norm = 0.25 + 0.75·2/1.5 = 1.25, tf~ = 0.8, 0.8/(1.2+0.8) = 0.4.
	want := math.Ln2 * 0.4
	if len(hits) != 1 || hits[0].ID != "a" || math.Abs(hits[0].Score-want) > 1e-6 {
		t.Fatalf("hits = %+v, want a with %.6f", hits, want)
	}
	// "alpha": df 2, idf = ln(1 + 0.5/2.5) = ln 1.2; the shorter doc wins.
	hits = ix.Search("alpha", 10, Filter{})
	if got := ids(hits); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("alpha ranks %v", got)
	}
	// Doc b: len 1, norm = 0.25 + 0.75/1.5 = 0.75, tf~ = 4/3, w = (4/3)/(1.2+4/3).
	wantB := math.Log(1.2) * (4.0 / 3) / (1.2 + 4.0/3)
	if math.Abs(hits[0].Score-wantB) > 1e-6 {
		t.Fatalf("score of b = %.6f, want %.6f", hits[0].Score, wantB)
	}
}

func TestFieldWeights(t *testing.T) {
	docs := []Doc{
		{ID: "s/in_name", Server: "s", Name: "weather", Description: "Reports conditions."},
		{ID: "s/in_desc", Server: "s", Name: "conditions", Description: "Reports weather."},
	}
	o := DefaultOptions()
	o.ServerBoost = 0
	ix := newIndex(t, o)
	ix.Apply(docs, nil, false)
	if got := ids(ix.Search("weather", 10, Filter{})); !slices.Equal(got, []string{"s/in_name", "s/in_desc"}) {
		t.Fatalf("name weight 3 > description weight 1, got %v", got)
	}
	o.Weights[FieldName], o.Weights[FieldDescription] = 0.1, 5
	ix = newIndex(t, o)
	ix.Apply(docs, nil, false)
	if got := ids(ix.Search("weather", 10, Filter{})); !slices.Equal(got, []string{"s/in_desc", "s/in_name"}) {
		t.Fatalf("description weighted up, got %v", got)
	}
}

func TestIncrementalIndex(t *testing.T) {
	ix := newIndex(t, DefaultOptions())
	n := ix.Apply([]Doc{
		{ID: "fs/read_file", Server: "fs", Name: "read_file", Description: "Read a file."},
		{ID: "fs/write_file", Server: "fs", Name: "write_file", Description: "Write a file."},
	}, nil, false)
	if n != 2 {
		t.Fatalf("indexed %d, want 2", n)
	}
	h1, _ := ix.Hash("fs/read_file")

	// Same content: skipped (hash unchanged).
	ix.Apply([]Doc{{ID: "fs/read_file", Server: "fs", Name: "read_file", Description: "Read a file."}}, nil, false)
	if h2, _ := ix.Hash("fs/read_file"); h2 != h1 || ix.Len() != 2 {
		t.Fatalf("unchanged upsert changed the index: %s → %s, len %d", h1, h2, ix.Len())
	}

	// Changed content replaces the old version: its old words stop matching.
	ix.Apply([]Doc{{ID: "fs/read_file", Server: "fs", Name: "read_file", Description: "Load bytes from disk."}}, nil, false)
	if ix.Len() != 2 {
		t.Fatalf("len %d after replace", ix.Len())
	}
	if got := ids(ix.Search("disk", 10, Filter{})); !slices.Equal(got, []string{"fs/read_file"}) {
		t.Fatalf("new content not searchable: %v", got)
	}

	// Delete.
	ix.Apply(nil, []string{"fs/write_file", "no/such"}, false)
	if got := ids(ix.Search("write", 10, Filter{})); len(got) != 0 {
		t.Fatalf("deleted doc still found: %v", got)
	}

	// Reset drops everything before applying upserts.
	n = ix.Apply([]Doc{{ID: "git/log", Server: "git", Name: "log"}}, nil, true)
	if n != 1 || len(ix.Search("read", 10, Filter{})) != 0 {
		t.Fatalf("reset kept old docs: len %d", n)
	}
}

func TestCompactionKeepsResults(t *testing.T) {
	ix := newIndex(t, DefaultOptions())
	var docs []Doc
	for i := range 1000 {
		docs = append(docs, Doc{ID: fmt.Sprintf("s%d/tool%d", i%7, i), Server: fmt.Sprintf("s%d", i%7), Name: fmt.Sprintf("tool%d", i), Description: fmt.Sprintf("word%d common", i%13)})
	}
	ix.Apply(docs, nil, false)
	var del []string
	for i := range 900 {
		del = append(del, docs[i].ID)
	}
	ix.Apply(nil, del, false)
	if len(ix.docs) != 100 {
		t.Fatalf("no compaction: %d slots for %d docs", len(ix.docs), ix.Len())
	}
	fresh := newIndex(t, DefaultOptions())
	fresh.Apply(docs[900:], nil, false)
	for _, q := range []string{"common", "word3", "tool950 word4"} {
		a, b := ix.Search(q, 20, Filter{}), fresh.Search(q, 20, Filter{})
		if !slices.Equal(a, b) {
			t.Fatalf("query %q: compacted %v, fresh %v", q, a, b)
		}
	}
}

func TestFilters(t *testing.T) {
	ix := newIndex(t, DefaultOptions())
	ix.Apply([]Doc{
		{ID: "a/search", Kind: "tool", Server: "a", Name: "search"},
		{ID: "b/search", Kind: "tool", Server: "b", Name: "search"},
		{ID: "skills/search", Kind: "skill", Server: "skills", Name: "search"},
	}, nil, false)
	tests := []struct {
		f    Filter
		want []string
	}{
		{Filter{}, []string{"a/search", "b/search", "skills/search"}},
		{Filter{Servers: []string{"b"}}, []string{"b/search"}},
		{Filter{Servers: []string{"a", "skills"}}, []string{"a/search", "skills/search"}},
		{Filter{Kinds: []string{"skill"}}, []string{"skills/search"}},
		{Filter{Kinds: []string{"tool"}, Servers: []string{"skills"}}, nil},
		{Filter{Servers: []string{"unknown"}}, nil},
	}
	for _, tt := range tests {
		got := ids(ix.Search("search", 10, tt.f))
		slices.Sort(got)
		if !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
			t.Errorf("filter %+v: got %v, want %v", tt.f, got, tt.want)
		}
	}
}

func TestLimitAndTies(t *testing.T) {
	ix := newIndex(t, nameOnly())
	var docs []Doc
	for _, id := range []string{"d", "b", "e", "a", "c"} {
		docs = append(docs, Doc{ID: id, Name: "same"})
	}
	ix.Apply(docs, nil, false)
	if got := ids(ix.Search("same", 3, Filter{})); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("ties must break by id: %v", got)
	}
	if got := ix.Search("same", 0, Filter{}); got != nil {
		t.Fatalf("limit 0 returned %v", got)
	}
	if got := ix.Search("absent", 3, Filter{}); len(got) != 0 {
		t.Fatalf("unmatched query returned %v", got)
	}
}

func TestServerBoostLiftsSiblings(t *testing.T) {
	docs := []Doc{
		{ID: "maps/geocode", Server: "maps", Name: "geocode", Description: "Address to coordinates."},
		{ID: "maps/parking", Server: "maps", Name: "find_parking", Description: "Parking near a place."},
		{ID: "other/coordinates", Server: "other", Name: "convert", Description: "Convert coordinates between systems, coordinates."},
	}
	q := "parking near the coordinates"
	o := DefaultOptions()
	o.ServerBoost = 0
	ix := newIndex(t, o)
	ix.Apply(docs, nil, false)
	plain := ids(ix.Search(q, 3, Filter{}))
	o.ServerBoost = 1
	ix = newIndex(t, o)
	ix.Apply(docs, nil, false)
	boosted := ids(ix.Search(q, 3, Filter{}))
	if slices.Index(boosted, "maps/geocode") >= slices.Index(plain, "maps/geocode") || boosted[0] != "maps/parking" {
		t.Fatalf("boost should lift maps/geocode: without %v, with %v", plain, boosted)
	}
}

func TestQueryExpansion(t *testing.T) {
	docs := []Doc{
		{ID: "fs/write_file", Server: "fs", Name: "write_file", Description: "Write content.", InputSchema: []byte(`{"properties":{"path":{},"content":{}}}`)},
		{ID: "notes/remember", Server: "notes", Name: "remember", Description: "Keep a report in memory."},
	}
	o := DefaultOptions()
	o.ServerBoost = 0
	ix := newIndex(t, o)
	ix.Apply(docs, nil, false)
	if got := ids(ix.Search("save the report", 2, Filter{})); !slices.Contains(got, "fs/write_file") {
		t.Fatalf("save should expand to write: %v", got)
	}
	if got := ids(ix.Search("keep the report at /tmp/out/report.md", 2, Filter{})); len(got) == 0 || got[0] != "fs/write_file" {
		t.Fatalf("a path should favour file tools: %v", got)
	}
	o.ExpansionWeight, o.PathExpansion = 0, nil
	ix = newIndex(t, o)
	ix.Apply(docs, nil, false)
	if got := ids(ix.Search("save the report", 2, Filter{})); slices.Contains(got, "fs/write_file") {
		t.Fatalf("expansion off still matched write: %v", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	bad := []func(*Options){
		func(o *Options) { o.K1 = 0 },
		func(o *Options) { o.B = 1.5 },
		func(o *Options) { o.B = math.NaN() },
		func(o *Options) { o.ServerBoost = -1 },
		func(o *Options) { o.ExpansionWeight = 2 },
		func(o *Options) { o.Weights[FieldServer] = -1 },
		func(o *Options) { o.Weights = [NumFields]float64{} },
	}
	for i, mut := range bad {
		o := DefaultOptions()
		mut(&o)
		if _, err := New(o); err == nil {
			t.Errorf("case %d: invalid options accepted", i)
		}
	}
	for _, o := range []Options{DefaultOptions(), PlainOptions()} {
		if err := o.Validate(); err != nil {
			t.Errorf("built-in options rejected: %v", err)
		}
	}
}

// TestConcurrentSearchAndIndex runs under -race in CI: searches share the
// index while batches are applied and weights are recomputed lazily.
func TestConcurrentSearchAndIndex(t *testing.T) {
	ix := newIndex(t, DefaultOptions())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if w == 0 {
					ix.Apply([]Doc{{ID: fmt.Sprintf("s/t%d", i%50), Server: "s", Name: fmt.Sprintf("tool %d", i), Description: "search the web"}}, []string{fmt.Sprintf("s/t%d", (i+25)%50)}, false)
					continue
				}
				for _, h := range ix.Search("search web tool", 5, Filter{}) {
					if h.Score <= 0 {
						t.Errorf("non-positive score %v", h)
					}
				}
			}
		})
	}
	wg.Wait()
}
