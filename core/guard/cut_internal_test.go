package guard

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		off, size int
		want      int
	}{
		{"fits", "short text", 0, 100, 10},
		{"at a line end", "aaaa\nbbbb\ncccc", 0, 12, 10},
		{"line end too early, at a space", "a\nbbbbbbb cccc", 0, 12, 10},
		{"no break, on a character boundary", strings.Repeat("é", 10), 0, 7, 6},
		{"from an offset", "xx\naaaa\nbbbb\ncc", 3, 8, 8},
	}
	for _, tt := range tests {
		got := cut(tt.text, tt.off, tt.size)
		if got != tt.want {
			t.Errorf("%s: cut = %d, want %d", tt.name, got, tt.want)
		}
		if !utf8.ValidString(tt.text[tt.off:got]) {
			t.Errorf("%s: chunk %q is not whole characters", tt.name, tt.text[tt.off:got])
		}
	}
}
