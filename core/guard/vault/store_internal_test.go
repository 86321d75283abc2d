package vault

import (
	"fmt"
	"strings"
	"testing"
)

// fill reserves n token-shaped strings in a session's vault (no detector
// needed) and closes it.
func fill(tb testing.TB, s *Store, session string, n int) {
	tb.Helper()
	v, err := s.Open("acme", session, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer v.Close()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[EMAIL_%d] ", i+1)
	}
	if _, err := v.Tokenize(tb.Context(), b.String()); err != nil {
		tb.Fatal(err)
	}
}

// TestIdleVaultsStayLoaded: a session's executions open and close its
// vault each time; only the first reads it from disk, until maxIdle other
// vaults pushed it out. Delete still works on an idle vault.
func TestIdleVaultsStayLoaded(t *testing.T) {
	s, err := NewStore(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, "s", 100)
	for range 10 {
		v, err := s.Open("acme", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		v.Close()
	}
	if n := s.loads.Load(); n != 1 {
		t.Errorf("10 executions of one session loaded its vault %d times, want 1", n)
	}
	for i := range maxIdle {
		fill(t, s, fmt.Sprint("other", i), 1)
	}
	before := s.loads.Load()
	fill(t, s, "s", 1)
	if n := s.loads.Load() - before; n != 1 {
		t.Errorf("a vault pushed out of the idle set loaded %d times, want 1", n)
	}
	if err := s.Delete("acme", "s"); err != nil {
		t.Errorf("Delete of an idle vault: %v", err)
	}
	v, err := s.Open("acme", "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if len(v.st.reserved) != 0 {
		t.Errorf("a deleted vault came back from memory with %d reservations", len(v.st.reserved))
	}
}

// BenchmarkReopenFullVault is a session's execution with a full vault:
// open, close. It reports the entries so figures compare across caps.
func BenchmarkReopenFullVault(b *testing.B) {
	s, err := NewStore(Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s, "s", DefaultMaxEntries-1)
	for b.Loop() {
		v, err := s.Open("acme", "s", nil)
		if err != nil {
			b.Fatal(err)
		}
		v.Close()
	}
	b.ReportMetric(float64(DefaultMaxEntries-1), "entries")
}
