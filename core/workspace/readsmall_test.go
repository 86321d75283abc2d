package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadSmall reads files around the first buffer's size, into a new
// buffer and into one reused from a larger read, as the session listing
// does; a FIFO planted in the folder must not block it.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	reused := make([]byte, 0, 8)
	for _, n := range []int{0, 1, 511, 512, 513, 5000, 3} {
		want := bytes.Repeat([]byte{'x'}, n)
		if err := os.WriteFile(filepath.Join(dir, "f"), want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readSmall(root, "f", nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes into a new buffer: got %d bytes, %v", n, len(got), err)
		}
		reused, err = readSmall(root, "f", reused)
		if err != nil || !bytes.Equal(reused, want) {
			t.Errorf("%d bytes into a reused buffer: got %d bytes, %v", n, len(reused), err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readSmall(root, "fifo", nil); err != nil || len(got) != 0 {
		t.Errorf("a FIFO with no writer: %q, %v; want nothing read at once", got, err)
	}
}
