package textmime

import "testing"

func TestIs(t *testing.T) {
	tests := []struct {
		mime string
		want bool
	}{
		{"text/plain", true},
		{"Text/CSV; charset=latin1", true},
		{"application/json", true},
		{"application/ld+json", true},
		{"image/svg+xml", true},
		{"application/x-yaml", true},
		{"application/octet-stream", false},
		{"application/pdf", false},
		{"image/png", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := Is(tt.mime); got != tt.want {
			t.Errorf("Is(%q) = %v, want %v", tt.mime, got, tt.want)
		}
	}
}
