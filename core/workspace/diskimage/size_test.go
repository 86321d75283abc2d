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
	g, err := readGeometry(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %d bytes, %d on disk; %d inodes for a %d files limit", st.Size(), onDisk, g.inodes, lim.Files)
	if g.inodes < lim.Files || g.inodes > lim.Files+lim.Files/8 {
		t.Errorf("%d inodes for a %d files limit", g.inodes, lim.Files)
	}
	if onDisk > 64<<20 {
		t.Errorf("a new 1 GiB image takes %d bytes of the host's disk", onDisk)
	}
}
