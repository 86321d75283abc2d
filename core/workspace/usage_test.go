package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
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

// TestUsageOffRequestPath: with a 3,000-level chain in the workspace and a
// disk quota, executions and host writes never walk it; the accountant does,
// in the background, debounced, and its figure then gates writes.
func TestUsageOffRequestPath(t *testing.T) {
	var armed atomic.Bool
	var walks atomic.Int64
	gate := make(chan struct{})
	walkHook = func() {
		if armed.Load() {
			walks.Add(1)
			<-gate
		}
	}
	defer func() { walkHook = nil }()

	m := newManager(t, Options{DefaultQuota: Quota{DiskBytes: 1 << 20}})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.DiskUsage(); err != nil { // the first figure
		t.Fatal(err)
	}
	makeChain(t, tn.WorkspaceDir(), 3000, 2<<20)
	armed.Store(true)

	done := make(chan error, 1)
	go func() {
		for i := range 3 {
			run, err := tn.Begin("s")
			if err != nil {
				done <- err
				return
			}
			if _, err := run.Finish(Entry{Code: "print(1)"}); err != nil {
				done <- err
				return
			}
			if _, err := tn.SaveState(fmt.Sprint("s", i, ".json"), json.RawMessage(`1`)); err != nil {
				done <- err
				return
			}
			if _, err := tn.DiskUsage(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(gate)
		t.Fatal("an execution or a host write walked the workspace (it waited for the blocked walk)")
	}
	close(gate)
	settle(tn)
	if n := walks.Load(); n < 1 || n > 2 {
		t.Errorf("the accountant walked %d times for 3 executions, want 1 or 2 (debounced)", n)
	}
	if _, err := tn.SaveState("more.json", json.RawMessage(`2`)); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("SaveState after the accountant saw the chain = %v, want ErrQuotaExceeded", err)
	}
}
