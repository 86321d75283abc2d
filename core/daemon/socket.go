package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// ErrAlreadyRunning is wrapped by Run's error when another cexecd serves, or
// is starting on, the same socket.
var ErrAlreadyRunning = errors.New("another cexecd is already running")

// socketClaim is this daemon's exclusive hold on a socket path: an flock on
// "<socket>.lock" (so two daemons starting at once cannot both win) and,
// once listening, the socket itself.
type socketClaim struct {
	path string
	lock *os.File
	log  hclog.Logger
}

// claimSocket makes sure the socket's directory is private, takes the lock,
// refuses when a live daemon answers on path and removes a stale socket.
func claimSocket(ctx context.Context, path string, log hclog.Logger) (*socketClaim, error) {
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	// Before the lock file, so that a mistyped -socket leaves nothing
	// beside the file it names; checked again under the lock.
	if err := notSocket(path); err != nil {
		return nil, err
	}
	lockPath := path + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, runningError(ctx, path, lockPath)
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	// The pid in the lock file names the owner while it is still starting
	// and not yet answering Status.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}

	// Holding the lock means no cooperating daemon owns the socket, but one
	// whose lock file was deleted would still answer: ask before removing.
	if pid, ok := ask(ctx, path); ok {
		_ = f.Close()
		return nil, fmt.Errorf("%w on %s (pid %d); stop it first or choose another -socket", ErrAlreadyRunning, path, pid)
	}
	if err := notSocket(path); err != nil {
		_ = f.Close()
		return nil, err
	}
	switch _, err := os.Lstat(path); {
	case err == nil:
		if err := os.Remove(path); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
		log.Info("removed stale socket", "socket", path)
	case !errors.Is(err, fs.ErrNotExist):
		_ = f.Close()
		return nil, fmt.Errorf("check socket %s: %w", path, err)
	}
	return &socketClaim{path: path, lock: f, log: log}, nil
}

// listen creates the socket with mode 0600. The directory is already 0700,
// so the moment between bind and chmod exposes nothing.
func (c *socketClaim) listen() (net.Listener, error) {
	ln, err := net.Listen("unix", c.path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", c.path, err)
	}
	if err := os.Chmod(c.path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", c.path, err)
	}
	return ln, nil
}

// release removes the socket and drops the lock. The lock file stays: removing
// it would let a daemon that opened it just before race one that creates a
// new one.
func (c *socketClaim) release() {
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		// The next start removes it as stale.
		c.log.Warn("cannot remove socket", "socket", c.path, "error", err)
	}
	_ = c.lock.Close()
}

// runningError describes the daemon holding the lock: its pid from Status if
// it answers, else from the lock file.
func runningError(ctx context.Context, path, lockPath string) error {
	if pid, ok := ask(ctx, path); ok {
		return fmt.Errorf("%w on %s (pid %d); stop it first or choose another -socket", ErrAlreadyRunning, path, pid)
	}
	who := "another cexecd"
	if b, err := os.ReadFile(lockPath); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			who += fmt.Sprintf(" (pid %d)", pid)
		}
	}
	return fmt.Errorf("%w: %s holds %s and is still starting; stop it first or choose another -socket", ErrAlreadyRunning, who, lockPath)
}

// ask reports whether a daemon answers Status on path, and its pid.
func ask(ctx context.Context, path string) (int, bool) {
	if _, err := os.Lstat(path); err != nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///cexecd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}))
	if err != nil {
		return 0, false
	}
	defer func() { _ = conn.Close() }()
	st, err := cexecv1.NewControlClient(conn).Status(ctx, &cexecv1.StatusRequest{})
	if err != nil {
		return 0, false
	}
	return int(st.GetPid()), true
}

// privateDir creates dir with mode 0700 when missing and refuses a directory
// that others could write to or that belongs to someone else: either could
// swap the socket for their own and intercept control calls.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket directory %s belongs to uid %d, not to this user (uid %d); choose another -socket", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s is writable by group or others (mode %04o); put the socket in a private directory (mode 0700)", dir, fi.Mode().Perm())
	}
	return nil
}

// notSocket refuses a path that exists and is not a socket: a mistyped
// -socket must not cost someone a file.
func notSocket(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%s); choose another -socket", path, fileKind(fi.Mode()))
	}
	return nil
}

// fileKind names what a path is, for an error that refuses it.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return "not a socket"
}
