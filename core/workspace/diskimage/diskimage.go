// Package diskimage holds a folder to a size and a file count at write
// time: the folder is the mount point of an ext4 file system in a sparse
// image file, attached to a loop device. Writes past the limits fail in
// the writer with ENOSPC; reading the usage is one statfs.
//
// The image is sized so that unprivileged users (sandboxed code) get
// Limits.Bytes and root (cexecd) Limits.Reserve more: ext4's reserved blocks
// let the daemon's own writes (session logs, state) land after a program
// filled the folder. The inode count is Limits.Files plus what ext4 keeps
// for itself, rounded up to whole inode tables.
//
// It needs root, /dev/loop-control and e2fsprogs (mkfs.ext4, resize2fs,
// tune2fs, dumpe2fs); Supported says whether they are there. Images are
// formatted and resized by those tools; loop devices and mounts are set up
// with ioctl(2) and mount(2), with LO_FLAGS_AUTOCLEAR so that unmounting
// frees the loop device.
package diskimage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Limits size an image.
type Limits struct {
	// Bytes is the space unprivileged users may fill.
	Bytes int64
	// Files bounds the inodes (files, folders, links) of everyone.
	Files int64
	// Reserve is space beyond Bytes only root may fill.
	Reserve int64
}

// Usage is what a mounted image holds, from one statfs.
type Usage struct {
	Bytes int64 // used by everyone, reserve included
	Files int64 // inodes in use, ext4's own included
	// FreeBytes and FreeFiles are what unprivileged users may still add.
	FreeBytes int64
	FreeFiles int64
	// RootFreeBytes is what root may still add: FreeBytes and the reserve
	// left.
	RootFreeBytes int64
}

// ErrShrinkBelowUse: an image cannot shrink below what it holds.
var ErrShrinkBelowUse = errors.New("the image holds more than the new size")

// tools are the e2fsprogs binaries the package runs.
var tools = []string{"mkfs.ext4", "resize2fs", "tune2fs", "dumpe2fs"}

// Supported returns nil when this process can create and mount images, or
// why not.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("mounting file system images needs root")
	}
	f, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no loop devices: %w", err)
	}
	f.Close()
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("e2fsprogs is not installed: %w", err)
		}
	}
	return nil
}

// ext4's own inodes (reserved ones, root, lost+found) on top of Files.
const ownInodes = 16

// Create writes a new sparse image at path sized for lim. An existing file
// at path is replaced.
func Create(ctx context.Context, path string, lim Limits) error {
	if lim.Bytes <= 0 || lim.Files <= 0 {
		return fmt.Errorf("create image %s: limits must be positive", path)
	}
	tmp := path + ".new"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create image %s: %w", path, err)
	}
	err = f.Truncate(estimate(lim))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// 4 KiB blocks make block groups of 128 MiB, so an image up to
		// that size has one group and exactly the inodes asked for (a
		// resize adds or drops inodes with whole groups). -m 0: Fit sets
		// the reserve. Lazy init: inode tables and journal stay holes in
		// the image until used.
		err = run(ctx, "mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-N", strconv.FormatInt(lim.Files+ownInodes, 10),
			"-J", "size="+strconv.FormatInt(journalMiB(lim), 10),
			"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp)
	}
	if err == nil {
		err = Fit(ctx, tmp, lim, 0)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("create image %s: %w", path, err)
	}
	return nil
}

// estimate is a first size for an image: the limits plus ext4's metadata
// (256-byte inodes, journal, bitmaps); Fit corrects it.
func estimate(lim Limits) int64 {
	return lim.Bytes + lim.Reserve + (lim.Files+ownInodes)*256 + journalMiB(lim)<<20 + lim.Bytes/64 + 256<<10
}

// journalMiB is the journal's size: ext4's default is up to 1 GiB, far more
// than a tenant's writes need to stay crash-safe.
// 1024 blocks is the smallest journal mkfs.ext4 makes.
func journalMiB(lim Limits) int64 { return min(max(lim.Bytes>>26, 4), 64) }

// geometry is what dumpe2fs says of an image.
type geometry struct {
	blockSize, blocks, free, reserved, inodes int64
	inodesPerGroup, blocksPerGroup, inodeSize int64
}

func readGeometry(ctx context.Context, dev string) (geometry, error) {
	out, err := output(ctx, "dumpe2fs", "-h", dev)
	if err != nil {
		return geometry{}, err
	}
	var g geometry
	fields := map[string]*int64{"Block size": &g.blockSize, "Block count": &g.blocks, "Free blocks": &g.free,
		"Reserved block count": &g.reserved, "Inode count": &g.inodes,
		"Inodes per group": &g.inodesPerGroup, "Blocks per group": &g.blocksPerGroup, "Inode size": &g.inodeSize}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if p := fields[k]; ok && p != nil {
			*p, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if g.blockSize == 0 || g.blocks == 0 || g.inodesPerGroup == 0 || g.blocksPerGroup == 0 {
		return g, fmt.Errorf("dumpe2fs %s: no block size or count", dev)
	}
	return g, nil
}

// kernelReserve is what ext4 keeps back from everyone for delayed
// allocation: 2% of the blocks, at most 4096 (ext4_calculate_resv_clusters).
func (g geometry) kernelReserve() int64 { return min(g.blocks/50, 4096) }

// minBlocks is the smallest size that keeps files inodes: ext4 has a fixed
// number of inodes per block group, so shrinking drops groups and their
// inodes.
func (g geometry) minBlocks(files int64) int64 {
	groups := ceilDiv(files+ownInodes, g.inodesPerGroup)
	return (groups-1)*g.blocksPerGroup + ceilDiv(g.inodesPerGroup*g.inodeSize, g.blockSize) + 64
}

// Fit resizes the unmounted image at path, which holds used bytes
// (Usage.Bytes when it was last mounted), so that unprivileged users get
// lim.Bytes in all (rounded up to a block) and root lim.Reserve more: it
// grows or shrinks the file system with resize2fs, then sets the reserved
// blocks with tune2fs. Shrinking below what the image holds fails with
// ErrShrinkBelowUse and changes nothing. The inode count stays as created.
func Fit(ctx context.Context, path string, lim Limits, used int64) error {
	g, err := readGeometry(ctx, path)
	if err != nil {
		return err
	}
	// want is what is still free for unprivileged users.
	want := ceilDiv(lim.Bytes, g.blockSize) - used/g.blockSize
	if want < 0 {
		return fmt.Errorf("shrink to %d bytes: %w (%d bytes in use)", lim.Bytes, ErrShrinkBelowUse, used)
	}
	reserve := ceilDiv(lim.Reserve, g.blockSize)
	for range 8 {
		spare := g.free - g.kernelReserve() - want - reserve
		if spare >= 0 && spare <= max(reserve, 256) {
			break
		}
		// The kernel's reserve and the group metadata move with the size:
		// aim a little over and correct in the next round.
		next := max(g.blocks-spare+max(-spare/32, 0)+8, g.minBlocks(lim.Files))
		if next == g.blocks {
			break // the rest stays with root: the inodes need the groups
		}
		if err := resize(ctx, path, next*g.blockSize); err != nil {
			if spare > 0 {
				return fmt.Errorf("shrink to %d bytes: %w (%w)", lim.Bytes, ErrShrinkBelowUse, err)
			}
			return err
		}
		if g, err = readGeometry(ctx, path); err != nil {
			return err
		}
	}
	r := g.free - g.kernelReserve() - want
	if r < 0 {
		return fmt.Errorf("image %s: %d blocks short of %d bytes after resizing", path, -r, lim.Bytes)
	}
	if r == g.reserved {
		return nil
	}
	return run(ctx, "tune2fs", "-r", strconv.FormatInt(r, 10), path)
}

// resize sets the unmounted image's file system and file to size bytes.
func resize(ctx context.Context, path string, size int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if size > st.Size() {
		if err := os.Truncate(path, size); err != nil {
			return err
		}
	}
	if err := run(ctx, "resize2fs", "-f", path, strconv.FormatInt(size/1024, 10)+"K"); err != nil {
		return err
	}
	if size < st.Size() {
		return os.Truncate(path, size)
	}
	return nil
}

// Mount attaches the image at path to a free loop device and mounts it on
// dir (nosuid, nodev; discard, so that deleted files give space back to the
// host). When dir already is a mount of that image (a daemon that crashed
// left it), Mount keeps it. When the image is still attached elsewhere (its
// file system held by a process of an earlier daemon, a sandbox not yet
// ended, after its mount on dir went), Mount waits for that to end, at most
// DetachWait: two file systems on one image would corrupt it.
func Mount(ctx context.Context, path, dir string) error {
	if dev, err := mountedDevice(path, dir); err != nil {
		return err
	} else if dev != "" {
		return nil
	}
	if err := awaitDetached(ctx, path); err != nil {
		return err
	}
	img, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount image %s: %w", path, err)
	}
	defer img.Close()
	loop, dev, err := attach(ctx, img)
	if err != nil {
		return fmt.Errorf("mount image %s: %w", path, err)
	}
	// Autoclear frees the device once it is unmounted and this descriptor
	// closed.
	defer loop.Close()
	if err := unix.Mount(dev, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "discard,noinit_itable"); err != nil {
		_ = unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("mount image %s on %s: %w", path, dir, err)
	}
	return nil
}

// attach binds img to a free loop device. Another process may take the
// device between LOOP_CTL_GET_FREE and LOOP_CONFIGURE; then it tries the
// next one.
func attach(ctx context.Context, img *os.File) (*os.File, string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", err
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img.Name())
	for range 32 {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, "", fmt.Errorf("find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, "", err
		}
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if err == nil {
			return loop, dev, nil
		}
		loop.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, "", fmt.Errorf("configure %s: %w", dev, err)
		}
	}
	return nil, "", errors.New("no free loop device after 32 tries")
}

// DetachWait bounds Mount's wait for an earlier attachment of its image.
var DetachWait = 10 * time.Second

// awaitDetached waits until no loop device has the image at path for its
// backing file.
func awaitDetached(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, DetachWait)
	defer cancel()
	for {
		devs := attachedDevices(path)
		if len(devs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mount image %s: it is still attached to %s, whose file system a process of an earlier cexecd (a sandbox not yet ended) holds; mounting it again would corrupt it, so end that process: %w",
				path, strings.Join(devs, ", "), ErrBusy)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ErrBusy marks an image that is still in use elsewhere.
var ErrBusy = errors.New("image in use")

// attachedDevices lists the loop devices whose backing file is path.
func attachedDevices(path string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == path {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs
}

// Mounted reports whether dir is a mount of the image at path.
func Mounted(path, dir string) (bool, error) {
	dev, err := mountedDevice(path, dir)
	return dev != "", err
}

// mountedDevice is the loop device of the image at path mounted on dir, or
// "" when dir is no mount of it. A mount of something else on dir is an
// error.
func mountedDevice(path, dir string) (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var dev string
	for line := range strings.Lines(string(data)) {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 || unescape(f[4]) != dir {
			continue
		}
		dev = g[1] // the last mount on dir is the visible one
	}
	if dev == "" {
		return "", nil
	}
	backing, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil || strings.TrimSpace(string(backing)) != path {
		return "", fmt.Errorf("%s is already a mount of %s, not of the image %s", dir, dev, path)
	}
	return dev, nil
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and \.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Unmount unmounts dir; the loop device frees itself (autoclear). A mount
// still in use (a sandbox that outlived its daemon) is detached lazily. A
// dir that is not mounted is no error. The file system is synced first: a
// sandbox's own mount of it (its namespace) may outlive this one for a
// moment, and until the last goes, its dirty pages would not reach the
// image.
func Unmount(dir string) error {
	if f, err := os.Open(dir); err == nil {
		_ = unix.Syncfs(int(f.Fd()))
		f.Close()
	}
	err := unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// Fits reports whether an image with usage u gives unprivileged users
// lim.Bytes in all, give or take a few blocks: when not, Fit it.
func Fits(u Usage, lim Limits) bool {
	capacity := u.Bytes + u.FreeBytes
	return capacity >= lim.Bytes && capacity <= lim.Bytes+fitSlack
}

// fitSlack is how far over the limit an image may be before Fits asks for
// a resize: a few blocks of rounding.
const fitSlack = 64 << 10

// UsageOf is the usage of the image mounted on dir: one statfs.
func UsageOf(dir string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := st.Bsize
	return Usage{
		Bytes:         int64(st.Blocks-st.Bfree) * bs,
		Files:         int64(st.Files - st.Ffree),
		FreeBytes:     int64(st.Bavail) * bs,
		FreeFiles:     int64(st.Ffree),
		RootFreeBytes: int64(st.Bfree) * bs,
	}, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// run runs an e2fsprogs tool; its output goes into the error.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	cmd.Env = []string{"PATH=/usr/sbin:/sbin:/usr/bin:/bin", "LC_ALL=C"}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
