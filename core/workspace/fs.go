package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/internal/bytesize"
)

// tempPrefix marks files and folders that are being written. Valid names
// never start with a dot, so a temporary file can never be mistaken for
// state, a skill or a session, and leftovers of a crash are recognisable.
const tempPrefix = ".cexec-tmp-"

func tempName(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return tempPrefix + name + "-" + hex.EncodeToString(b[:])
}

// atomicWrite says how writeAtomic goes about it.
type atomicWrite struct {
	// sync is how much is fsynced before writeAtomic returns.
	sync fileSync
	// own, when set, gets the file.
	own *Owner
	// check, when set, vets the data while the temporary file is written
	// and synced (it overlaps the disk wait instead of adding to it); when
	// it fails, nothing is renamed and its error is returned.
	check func() error
	// discard, when set, makes a replacement an exchange (renameat2
	// RENAME_EXCHANGE) instead of a rename over the old file, and receives
	// the name in dir under which the old content then is: unlinking a file
	// costs more than the rest of a small write, and the caller may do it
	// later. Only for a regular file the caller has just seen in place.
	discard func(name string)
}

// writeAtomic replaces dir/name inside root with data: a temporary file in
// the same directory, fsync, rename over the old file, fsync the directory
// (as w.sync says). A crash at any point leaves either the old or the new
// content, never a mix; the temporary file is removed on error. Going
// through root means a symlink planted by sandboxed code cannot redirect the
// write out of it.
func writeAtomic(root *os.Root, dir, name string, data []byte, w atomicWrite) error {
	var checked chan error
	if w.check != nil {
		checked = make(chan error, 1)
		go func() { checked <- w.check() }()
	}
	tmpName := tempName(name)
	tmp := path.Join(dir, tmpName)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		if checked != nil {
			<-checked
		}
		return err
	}
	if w.own != nil {
		err = f.Chown(w.own.UID, w.own.GID)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && w.sync >= syncFile {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if checked != nil {
		if cerr := <-checked; err == nil {
			err = cerr
		}
	}
	exchanged := false
	if err == nil && w.discard != nil {
		exchanged, err = exchangeIfPresent(root, dir, tmpName, name)
	}
	if err == nil && !exchanged {
		err = root.Rename(tmp, path.Join(dir, name))
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	if exchanged {
		w.discard(tmpName)
	}
	if w.sync == syncFileAndDir {
		return syncDir(root, dir)
	}
	return nil
}

// exchangeIfPresent swaps dir/a and dir/b atomically when the file system
// can and b exists; false means nothing was done.
func exchangeIfPresent(root *os.Root, dir, a, b string) (bool, error) {
	err := withDir(root, dir, func(fd int) error { return unix.Renameat2(fd, a, fd, b, unix.RENAME_EXCHANGE) })
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return false, nil
	}
	return err == nil, err
}

// withDir runs fn on a descriptor of dir inside root. Names fn passes with
// it are single components resolved relative to the directory, so no
// symlink is followed.
func withDir(root *os.Root, dir string, fn func(fd int) error) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(int(d.Fd()))
}

// syncDir makes a rename or unlink in dir durable.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// exchange atomically swaps dir/a and dir/b (renameat2 RENAME_EXCHANGE), so
// a skill folder is replaced without a moment in which it is missing. On
// file systems without exchange it falls back to two renames.
func exchange(root *os.Root, dir, a, b string) error {
	return withDir(root, dir, func(fd int) error {
		err := unix.Renameat2(fd, a, fd, b, unix.RENAME_EXCHANGE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			aside := tempName(b)
			if err = unix.Renameat(fd, b, fd, aside); err != nil {
				return err
			}
			if err = unix.Renameat(fd, a, fd, b); err != nil {
				return err
			}
			return unix.Renameat(fd, aside, fd, a)
		}
		return err
	})
}

// openRegular opens dir/name for reading and insists on a regular file of at
// most max bytes. O_NONBLOCK keeps a FIFO planted by sandboxed code from
// blocking the daemon; it has no effect on regular files.
func openRegular(root *os.Root, name string, max int64) (*os.File, int64, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file", name)
	}
	if max > 0 && st.Size() > max {
		f.Close()
		return nil, 0, fmt.Errorf("%s is %s; the limit is %s: %w", name, bytesize.Format(st.Size()), bytesize.Format(max), ErrTooLarge)
	}
	return f, st.Size(), nil
}

// readRegular reads a whole regular file of at most max bytes.
func readRegular(root *os.Root, name string, max int64) ([]byte, error) {
	f, size, err := openRegular(root, name, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One read of the size Stat reported, plus one to see EOF; the file may
	// grow meanwhile, but never past max.
	buf := make([]byte, 0, size+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if max > 0 && int64(len(buf)) > max {
			return nil, fmt.Errorf("%s grew past the limit of %s: %w", name, bytesize.Format(max), ErrTooLarge)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// removeTemps deletes leftovers of writes interrupted by a crash in dir:
// those modified before cutoff (the zero time: all of them). Replicas on a
// shared data_dir pass a cutoff in the past, since another replica's write
// may be in flight.
func removeTemps(root *os.Root, dir string, cutoff time.Time) {
	d, err := root.Open(dir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if !strings.HasPrefix(n, tempPrefix) {
			continue
		}
		p := path.Join(dir, n)
		if !cutoff.IsZero() {
			if fi, err := root.Lstat(p); err != nil || !fi.ModTime().Before(cutoff) {
				continue
			}
		}
		_ = root.RemoveAll(p)
	}
}

// mkdirs creates directories (0700) inside root, tolerating existing ones,
// and hands them to own when it is not nil.
func mkdirs(root *os.Root, own *Owner, names ...string) error {
	for _, n := range names {
		if err := root.Mkdir(n, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if own != nil {
			if err := root.Lchown(n, own.UID, own.GID); err != nil {
				return err
			}
		}
	}
	return nil
}

// chownTree hands everything in root to own, never following symlinks
// (which the tenant's programs may have planted).
func chownTree(root *os.Root, own *Owner) error {
	return fs.WalkDir(root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return root.Lchown(p, own.UID, own.GID)
	})
}
