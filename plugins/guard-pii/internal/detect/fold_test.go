package detect_test

import (
	"testing"

	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

// TestObfuscations: values written in fullwidth forms or with zero-width
// characters inside are found, and their spans cover the original bytes,
// so the tokenizer replaces exactly them.
func TestObfuscations(t *testing.T) {
	d := mustNew(t, detect.Options{})
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"fullwidth email", "mail ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ now", []string{"EMAIL:ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ"}},
		{"fullwidth at sign only", "jane＠example.com", []string{"EMAIL:jane＠example.com"}},
		{"zero-width space in an email", "to ja\u200bne@exam\u200bple.com.", []string{"EMAIL:ja\u200bne@exam\u200bple.com"}},
		{"zero-width joiner and non-joiner", "jane\u200d.doe@\u200cexample.org", []string{"EMAIL:jane\u200d.doe@\u200cexample.org"}},
		{"word joiner and BOM", "\ufeffbob@exa\u2060mple.com", []string{"EMAIL:bob@exa\u2060mple.com"}},
		{"fullwidth SSN", "ssn ５３６－９０－４３９９", []string{"US_SSN:５３６－９０－４３９９"}},
		{"zero-width inside a card", "card 4111\u200b1111\u200b1111\u200b1111", []string{"CREDIT_CARD:4111\u200b1111\u200b1111\u200b1111"}},
		{"ideographic space ends a value", "ann@example.com\u3000next", []string{"EMAIL:ann@example.com"}},
		{"plain text around folded values keeps its offsets", "ａ bob@example.com ｂ", []string{"EMAIL:bob@example.com"}},
		{"fullwidth text with no value", "ｈｅｌｌｏ　ｗｏｒｌｄ", []string{}},
		{"lead bytes of other characters", "em — dash “quoted” ﬁ", []string{}},
		{"truncated fullwidth form", "a@b.com \xef\xbc", []string{"EMAIL:a@b.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := detectAll(t, d, tc.text)
			if len(got) != len(tc.want) {
				t.Fatalf("Detect(%q) = %q, want %q", tc.text, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("Detect(%q) = %q, want %q", tc.text, got, tc.want)
				}
			}
		})
	}
}
