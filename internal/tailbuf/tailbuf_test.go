package tailbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestBuffer(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"short", []string{"a\n", "b\n"}, "a\nb\n"},
		{"exactly full", []string{"0123456789\n"}, "0123456789\n"},
		{"keeps the end from a whole line", []string{"0123456789\n", "abc\n", "def\n"}, "abc\ndef\n"},
		{"one long line", []string{"0123456789abcdef"}, "456789abcdef"},
		{"one long line ending in a newline", []string{"0123456789abcdef\n"}, "56789abcdef\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(12)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := b.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWriteLine(t *testing.T) {
	b := New(8)
	for _, l := range []string{"first", "second", "third"} {
		b.WriteLine(l)
	}
	if got := b.String(); got != "third\n" {
		t.Errorf("String() = %q, want %q", got, "third\n")
	}
}

func TestConcurrentWrites(t *testing.T) {
	b := New(64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.WriteLine("x")
			}
		}()
	}
	wg.Wait()
	if got := b.String(); strings.Trim(got, "x\n") != "" || len(got) > 64 {
		t.Errorf("String() = %q", got)
	}
}
