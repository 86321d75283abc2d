package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recorder stands in for *testing.T so that SkipMissing's choice between
// skipping and failing can be observed without ending the real test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skipf(f string, a ...any)  { r.skipped = f }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = f }

func TestSkipMissing(t *testing.T) {
	for _, tc := range []struct {
		ci       string
		wantFail bool
	}{{"", false}, {"false", false}, {"true", true}} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{}
			SkipMissing(r, "no %s", "bwrap")
			if got := r.failed != ""; got != tc.wantFail {
				t.Fatalf("failed=%q skipped=%q, want fail=%v", r.failed, r.skipped, tc.wantFail)
			}
			if !tc.wantFail && r.skipped == "" {
				t.Fatal("neither skipped nor failed")
			}
		})
	}
}

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
			}
		}()
	}
	wg.Wait()
	if b.Len() != 800 || b.String() != strings.Repeat("x", 800) {
		t.Fatalf("got %d bytes", b.Len())
	}
}

func TestModuleRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(ModuleRoot(), "go.mod")); err != nil {
		t.Fatal(err)
	}
}
