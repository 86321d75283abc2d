package hostchan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// dirPrefix names the socket directories under their parent.
const dirPrefix = "cexec-host-"

// lockName is the file in a socket directory whose lock the owning daemon
// holds for as long as it runs: a directory whose lock can be taken
// belongs to a daemon that is gone (it crashed before Close).
const lockName = ".owner"

// holdDir takes the lock of a new socket directory and keeps it: the file
// stays open until the returned file is closed. The file is locked under
// a temporary name and then renamed, so that a sweep never finds it
// unlocked.
func holdDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, lockName+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, lockName)); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// sweepStale removes the socket directories under parent that a daemon
// left behind when it died: those whose owner lock nobody holds. It
// returns the directories removed. Directories of live daemons, and ones
// without a lock file (being made right now), are left alone.
func sweepStale(parent string) ([]string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, d := range dirs {
		f, err := os.OpenFile(filepath.Join(d, lockName), os.O_RDWR, 0)
		if err != nil {
			continue // not ours to read, or still being made
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			_ = f.Close()
			continue // a live daemon holds it
		}
		err = os.RemoveAll(d)
		_ = f.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}
