package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// makeChain makes depth nested folders under dir through openat (the path
// is far longer than PATH_MAX) and puts a file of size bytes at the bottom.
func makeChain(tb testing.TB, dir string, depth, size int) {
	tb.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
			tb.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			tb.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom", unix.O_WRONLY|unix.O_CREAT, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, make([]byte, size)); err != nil {
		tb.Fatal(err)
	}
}

func TestWalkUsage(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, dir string)
		want int64
	}{
		{"empty", func(*testing.T, string) {}, 0},
		{"flat and nested", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a.txt"), make([]byte, 10))
			writeFile(t, filepath.Join(dir, "x", "y", "b.txt"), make([]byte, 20))
			if err := os.Symlink("x/y/b.txt", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/", filepath.Join(dir, "x", "out")); err != nil {
				t.Fatal(err)
			}
		}, 10 + 20 + int64(len("x/y/b.txt")) + 1},
		{"3,000-level chain", func(t *testing.T, dir string) { makeChain(t, dir, 3000, 77) }, 77},
		{"chain beside files", func(t *testing.T, dir string) {
			makeChain(t, dir, 500, 5)
			writeFile(t, filepath.Join(dir, "z.txt"), make([]byte, 7))
		}, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(t, dir)
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if got, err := walkUsage(root); err != nil || got != tc.want {
				t.Fatalf("walkUsage = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// BenchmarkWalkUsage measures a workspace shaped as a deep chain and as many
// files, reporting the cost per entry: it should not depend on the shape.
func BenchmarkWalkUsage(b *testing.B) {
	for _, bc := range []struct {
		name    string
		entries int
		make    func(b *testing.B, dir string)
	}{
		{"chain-3000", 3001, func(b *testing.B, dir string) { makeChain(b, dir, 3000, 1) }},
		{"files-100k", 100_100, func(b *testing.B, dir string) {
			for d := range 100 {
				sub := filepath.Join(dir, fmt.Sprint("d", d))
				if err := os.Mkdir(sub, 0o700); err != nil {
					b.Fatal(err)
				}
				for f := range 1000 {
					if err := os.WriteFile(filepath.Join(sub, fmt.Sprint(f)), nil, 0o600); err != nil {
						b.Fatal(err)
					}
				}
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			bc.make(b, dir)
			root, err := os.OpenRoot(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			var total time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := walkUsage(root); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(bc.entries), "ns/entry")
		})
	}
}
