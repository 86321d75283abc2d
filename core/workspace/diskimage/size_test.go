package diskimage

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDefaultSizedImageIsSparse: the daemon's default (1 GiB, 131072
// files) costs the host little until written.
func TestDefaultSizedImageIsSparse(t *testing.T) {
	needImages(t)
	img := filepath.Join(t.TempDir(), "d.img")
	lim := Limits{Bytes: 1 << 30, Files: 131072, Reserve: 8 << 20}
	if err := Create(context.Background(), img, lim); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := st.Sys().(*syscall.Stat_t).Blocks * 512
	t.Logf("image %d bytes, %d on disk", st.Size(), onDisk)
	if onDisk > 64<<20 {
		t.Errorf("a new 1 GiB image takes %d bytes of the host's disk", onDisk)
	}
}
