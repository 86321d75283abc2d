package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// dataDirLock is this daemon's hold on its data_dir: one cexecd alone, or
// replicas together. Two daemons that do not share a store would each take
// the tenants' disk images for their own (and unmount them under the other
// on exit), cut each other's audit lines as torn, and corrupt the images.
type dataDirLock struct{ f *os.File }

// lockDataDir takes data_dir/cexecd.lock: exclusively for a daemon alone,
// shared for replicas (shared, the postgres store), so that replicas start
// beside each other but neither kind beside the other.
func lockDataDir(dir, socket string, shared bool) (*dataDirLock, error) {
	path := filepath.Join(dir, "cexecd.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if shared {
			return nil, fmt.Errorf("%w: data_dir %s is in use by a cexecd without a shared store%s; replicas all need store { kind = \"postgres\" }, else give this one its own -data-dir",
				ErrAlreadyRunning, dir, owner(path))
		}
		return nil, fmt.Errorf("%w: data_dir %s is in use by another cexecd%s; two daemons on one data_dir corrupt its tenants: stop it or give this one its own -data-dir",
			ErrAlreadyRunning, dir, owner(path))
	}
	if !shared {
		// Who holds it, for the next daemon's error; replicas share the
		// file and do not write it.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt(fmt.Appendf(nil, "%d %s\n", os.Getpid(), socket), 0)
		}
	}
	return &dataDirLock{f: f}, nil
}

// owner describes the daemon that wrote the lock file, " (pid N, socket
// S)", or "" (replicas, or one that has not written it yet).
func owner(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid, socket, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (pid %s, socket %s)", pid, socket)
}

// release drops the lock; the file stays, as the socket's does.
func (l *dataDirLock) release() { _ = l.f.Close() }
