package diskimage

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
)

func needImages(t *testing.T) {
	t.Helper()
	if err := Supported(); err != nil {
		testutil.SkipMissing(t, "file system images: %v", err)
	}
}

// mounted creates and mounts an image with lim in a temporary folder; the
// cleanup unmounts it.
func mounted(t *testing.T, lim Limits) (img, dir string) {
	t.Helper()
	needImages(t)
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil { // nobody must reach mnt
			t.Fatal(err)
		}
	}
	img, dir = filepath.Join(base, "t.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Create(context.Background(), img, lim); err != nil {
		t.Fatal(err)
	}
	if err := Mount(context.Background(), img, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Unmount(dir); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return img, dir
}

// asNobody runs a shell command as uid 65534 and returns its stderr.
func asNobody(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func TestLimitsHoldForUnprivilegedWriters(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
	}{
		{"2MiB", Limits{Bytes: 2 << 20, Files: 1000, Reserve: 1 << 20}},
		{"64MiB", Limits{Bytes: 64 << 20, Files: 20000, Reserve: 4 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, dir := mounted(t, tc.lim)
			out := asNobody(t, "dd if=/dev/zero of="+dir+"/big bs=64k count=100000")
			if !strings.Contains(out, "No space left on device") {
				t.Fatalf("dd past the limit: %s", out)
			}
			u, err := UsageOf(dir)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(filepath.Join(dir, "big"))
			over := st.Size() - tc.lim.Bytes
			t.Logf("limit %d, written %d (overshoot %d), used %d, reserve left %d", tc.lim.Bytes, st.Size(), over, u.Bytes, u.FreeBytes)
			if over > 64<<10 || over < -(64<<10) {
				t.Errorf("wrote %d bytes with a %d limit", st.Size(), tc.lim.Bytes)
			}
			// Root still writes into the reserve.
			if err := os.WriteFile(filepath.Join(dir, "log"), make([]byte, tc.lim.Reserve/2), 0o600); err != nil {
				t.Errorf("root write into the reserve: %v", err)
			}
		})
	}
}

func TestFilesLimit(t *testing.T) {
	_, dir := mounted(t, Limits{Bytes: 8 << 20, Files: 3000, Reserve: 1 << 20})
	out := asNobody(t, "cd "+dir+" && i=0; while [ $i -lt 20000 ]; do : > f$i || exit 0; i=$((i+1)); done")
	if !strings.Contains(out, "No space left on device") {
		t.Fatalf("creating files past the limit: %s", out)
	}
	u, _ := UsageOf(dir)
	t.Logf("files limit 3000, in use %d", u.Files)
	if u.Files < 3000 || u.Files > 3000+ownInodes+1024 {
		t.Errorf("%d inodes in use with a 3000 limit", u.Files)
	}
}

func TestRemountKeepsDataAndFitResizes(t *testing.T) {
	img, dir := mounted(t, Limits{Bytes: 2 << 20, Files: 1000, Reserve: 1 << 20})
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second Mount of the same image (a restarted daemon) keeps the mount.
	if err := Mount(context.Background(), img, dir); err != nil {
		t.Fatal(err)
	}
	if ok, err := Mounted(img, dir); !ok || err != nil {
		t.Fatalf("Mounted = %v, %v", ok, err)
	}
	for _, size := range []int64{8 << 20, 3 << 20} {
		lim := Limits{Bytes: size, Files: 1000, Reserve: 1 << 20}
		u, err := UsageOf(dir)
		if err != nil || Fits(u, lim) {
			t.Fatalf("usage %+v fits %+v: %v", u, lim, err)
		}
		if err := Unmount(dir); err != nil {
			t.Fatal(err)
		}
		if err := Fit(context.Background(), img, lim, u.Bytes); err != nil {
			t.Fatal(err)
		}
		if err := Mount(context.Background(), img, dir); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "keep")); string(b) != "data" {
			t.Fatalf("after remount: %q, %v", b, err)
		}
		if u, _ := UsageOf(dir); !Fits(u, lim) {
			t.Errorf("after resizing to %d: %+v", size, u)
		}
	}
	// Shrinking below what it holds is refused.
	if err := os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := UsageOf(dir)
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if err := Fit(context.Background(), img, Limits{Bytes: 1 << 20, Files: 1000}, u.Bytes); !errors.Is(err, ErrShrinkBelowUse) {
		t.Fatalf("shrink below use: %v", err)
	}
	if err := Mount(context.Background(), img, dir); err != nil {
		t.Fatal(err)
	}
}

func TestMountRefusesAForeignMount(t *testing.T) {
	_, dir := mounted(t, Limits{Bytes: 2 << 20, Files: 100, Reserve: 1 << 20})
	other := filepath.Join(t.TempDir(), "other.img")
	if err := Create(context.Background(), other, Limits{Bytes: 2 << 20, Files: 100}); err != nil {
		t.Fatal(err)
	}
	if err := Mount(context.Background(), other, dir); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("mount over another image's mount: %v", err)
	}
}

// TestMountWaitsForAnEarlierAttachment: a process in a mount namespace of
// its own keeps the image's file system alive after its mount on dir is
// gone (a sandbox outliving its daemon for a moment). Unmount syncs first,
// so what was written is on the image; Mount refuses to put a second file
// system on the image while the first lives, and mounts it once the
// process ended, with the data.
func TestMountWaitsForAnEarlierAttachment(t *testing.T) {
	img, dir := mounted(t, Limits{Bytes: 2 << 20, Files: 100, Reserve: 1 << 20})
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	defer func() { _ = holder.Process.Kill(); _, _ = holder.Process.Wait() }()
	// The holder has its copy of the mount once it is in a namespace of
	// its own.
	ours, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(holder.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ns, _ := os.Readlink("/proc/" + pid + "/ns/mnt")
		if b, err := os.ReadFile("/proc/" + pid + "/mounts"); err == nil && ns != "" && ns != ours && strings.Contains(string(b), dir) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder's namespace has no copy of the mount")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if len(attachedDevices(img)) == 0 {
		t.Fatal("the image was detached although the holder's namespace still mounts it")
	}
	saved := DetachWait
	DetachWait = 300 * time.Millisecond
	defer func() { DetachWait = saved }()
	if err := Mount(context.Background(), img, dir); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "still attached") {
		t.Fatalf("mount while the earlier file system lives: %v", err)
	}
	_ = holder.Process.Kill()
	_, _ = holder.Process.Wait()
	DetachWait = 10 * time.Second
	if err := Mount(context.Background(), img, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "kept" {
		t.Errorf("after the remount: %q, %v", b, err)
	}
}
