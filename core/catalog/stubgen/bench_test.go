package stubgen

import (
	"os"
	"testing"
)

// BenchmarkGenerateLiveMCPBench generates the stubs of all 527 LiveMCPBench tools (70
// servers) per iteration; the target for the whole tree is 1 s.
func BenchmarkGenerateLiveMCPBench(b *testing.B) {
	servers := liveMCPBench(b)
	if servers == nil {
		b.Skip("LiveMCPBench tools not available")
	}
	b.ReportAllocs()
	for b.Loop() {
		Generate(servers)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tree")
	b.ReportMetric(float64(countTools(servers)), "tools/tree")
}

// BenchmarkWriteLiveMCPBench writes the generated LiveMCPBench tree: "fresh" into an empty
// directory per iteration (cold start; bound by file creation on the disk), "unchanged"
// over an up-to-date tree (the usual regeneration after tools/list_changed, which only
// rewrites what changed).
func BenchmarkWriteLiveMCPBench(b *testing.B) {
	servers := liveMCPBench(b)
	if servers == nil {
		b.Skip("LiveMCPBench tools not available")
	}
	pkgs := Generate(servers)
	b.Run("fresh", func(b *testing.B) {
		parent := b.TempDir()
		for b.Loop() {
			dir, err := os.MkdirTemp(parent, "tree")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Write(dir, pkgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tree")
	})
	b.Run("unchanged", func(b *testing.B) {
		dir := b.TempDir()
		if _, err := Write(dir, pkgs); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rep, err := Write(dir, pkgs)
			if err != nil || len(rep.Written) != 0 {
				b.Fatalf("rewrite: %v, %d files written", err, len(rep.Written))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tree")
	})
}
