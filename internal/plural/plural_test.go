package plural

import "testing"

func TestCount(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, "0 errors"},
		{1, "1 error"},
		{2, "2 errors"},
	}
	for _, tt := range tests {
		if got := Count(tt.n, "error"); got != tt.want {
			t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := Count(int64(1), "line"); got != "1 line" {
		t.Errorf("Count(int64 1) = %q", got)
	}
}
