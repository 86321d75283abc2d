package ranker

import (
	"slices"
	"testing"
)

func TestAnalyze(t *testing.T) {
	full := AnalyzerOptions{SplitIdentifiers: true, Stem: true, Stopwords: true, ExtraStopwords: []string{"please"}, CJKBigrams: true}
	tests := []struct {
		name string
		opts AnalyzerOptions
		in   string
		want []string
	}{
		{"snake case", AnalyzerOptions{SplitIdentifiers: true}, "get_stock_price", []string{"get", "stock", "price"}},
		{"kebab case", AnalyzerOptions{SplitIdentifiers: true}, "get-weread-rank", []string{"get", "weread", "rank"}},
		{"camel case keeps joined form", AnalyzerOptions{SplitIdentifiers: true}, "PowerPoint", []string{"power", "point", "powerpoint"}},
		{"acronym then word", AnalyzerOptions{SplitIdentifiers: true}, "HTTPServer", []string{"http", "server", "httpserver"}},
		{"digits split, single letters dropped", AnalyzerOptions{SplitIdentifiers: true}, "base64 v2", []string{"base", "64", "base64", "2", "v2"}},
		{"no splitting is \\w+", AnalyzerOptions{}, "get_stock-Price getBazi", []string{"get_stock", "price", "getbazi"}},
		{"stemming", AnalyzerOptions{Stem: true}, "searching papers", []string{"search", "paper"}},
		{"stemming leaves identifiers with digits", AnalyzerOptions{Stem: true}, "mp3s", []string{"mp3s"}},
		{"stopwords and extras", full, "Please find the papers for me", []string{"find", "paper"}},
		{"stopwords off", AnalyzerOptions{}, "the papers", []string{"the", "papers"}},
		{"cjk bigrams", AnalyzerOptions{CJKBigrams: true}, "微信读书", []string{"微信", "信读", "读书"}},
		{"cjk single char", AnalyzerOptions{CJKBigrams: true}, "查 x", []string{"查"}},
		{"cjk run without bigrams", AnalyzerOptions{}, "微信读书", []string{"微信读书"}},
		{"mixed scripts", full, "bing搜索results", []string{"bing", "搜索", "result"}},
		{"punctuation only", full, "--- ... !!!", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewAnalyzer(tt.opts).Analyze(nil, tt.in)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Analyze(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestMentionsPath(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"save it to /root/markdown/cv.md.", true},
		{"write ~/notes/today.txt", true},
		{"open ./data.csv please", true},
		{"store in docs/report.md", true},
		{"summarise vercel/ai for me", false},
		{"fetch https://example.com/a.html", false},
		{"nothing here", false},
		{"a / b", false},
	}
	for _, tt := range tests {
		if got := mentionsPath(tt.in); got != tt.want {
			t.Errorf("mentionsPath(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
