package ranker

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFieldsWalksNestedSchema(t *testing.T) {
	schema := `{"type":"object","properties":{
		"query":{"type":"string","description":"Search keywords"},
		"options":{"type":"object","properties":{"max_results":{"type":"integer","description":"Result cap"}}},
		"filters":{"type":"array","items":{"type":"object","properties":{"field_name":{"type":"string"}}}},
		"mode":{"type":"string","enum":["fast","thorough"]},
		"target":{"anyOf":[{"$ref":"#/$defs/Loc"},{"type":"null"}]}},
		"$defs":{"Loc":{"type":"object","properties":{"latitude":{"type":"number","description":"Degrees north"}}}}}`
	f := Fields(Doc{ID: "s/t", Server: "s", Name: "t", Description: "Find things. Then more.", InputSchema: json.RawMessage(schema)})
	for _, want := range []string{"query", "options", "max_results", "filters", "field_name", "mode", "target", "latitude"} {
		if !strings.Contains(f[FieldParamNames], want) {
			t.Errorf("param names %q lack %q", f[FieldParamNames], want)
		}
	}
	for _, want := range []string{"Search keywords", "Result cap", "fast", "thorough", "Degrees north"} {
		if !strings.Contains(f[FieldParamDescriptions], want) {
			t.Errorf("param descriptions %q lack %q", f[FieldParamDescriptions], want)
		}
	}
	if f[FieldSummary] != "Find things" {
		t.Errorf("summary = %q", f[FieldSummary])
	}
}

func TestFieldsToleratesBadSchema(t *testing.T) {
	for _, schema := range []string{``, `null`, `[1,2]`, `{"properties":[]}`, `{not json`, `{"properties":{"a":"b"}}`} {
		f := Fields(Doc{Name: "n", InputSchema: json.RawMessage(schema)})
		if f[FieldName] != "n" {
			t.Fatalf("schema %q: name field %q", schema, f[FieldName])
		}
	}
}

func TestFieldsBoundsDeepSchema(t *testing.T) {
	var b strings.Builder
	for range 200 {
		b.WriteString(`{"properties":{"p":`)
	}
	b.WriteString(`{}`)
	for range 200 {
		b.WriteString(`}}`)
	}
	f := Fields(Doc{Name: "n", InputSchema: json.RawMessage(b.String())})
	if n := strings.Count(f[FieldParamNames], "p"); n == 0 || n > maxSchemaDepth+1 {
		t.Fatalf("deep schema yielded %d parameter names", n)
	}
}

func TestFirstSentence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Get the price. Use a symbol.", "Get the price"},
		{"  Version 1.2 is out. More.", "Version 1.2 is out"},
		{"获取排行榜。包含数据", "获取排行榜"},
		{"Line one\n\nParagraph two", "Line one"},
		{"No terminator", "No terminator"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := FirstSentence(tt.in); got != tt.want {
			t.Errorf("FirstSentence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
