package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/core/metrics"
)

// Dirs open a tenant's audit folder (workspace.Manager.WithAuditDir): fn
// runs with it while the tenant cannot be removed.
type Dirs interface {
	WithAuditDir(tenant string, fn func(dir *os.Root) error) error
}

// Options configure a Log.
type Options struct {
	// Tenants open the tenants' audit folders.
	Tenants Dirs
	// DaemonDir is the daemon's own log's folder (<data_dir>/audit).
	DaemonDir string
	// RotateSize and Keep are the audit block's.
	RotateSize int64
	Keep       int
	// Sync fsyncs every append (cexec.sync = "always").
	Sync bool
	// Shared says other cexecd replicas append to the same logs (a shared
	// data_dir): every append then holds a flock on the log's folder and
	// reads the chain's end from the files, not from this process's memory.
	Shared bool
	Logger hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Log writes the audit logs. Safe for concurrent use; appends to one log
// are serialised, different logs proceed in parallel.
type Log struct {
	o Options

	mu     sync.Mutex
	chains map[string]*chain
}

// chain is one log's position: the last line written.
type chain struct {
	mu     sync.Mutex
	loaded bool
	seq    uint64
	hash   string
	size   int64 // of the current file
	first  uint64
}

// New returns a Log.
func New(o Options) *Log {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Log{o: o, chains: map[string]*chain{}}
}

// Record appends events to tenant's log ("" is the daemon's own) in one
// write. A failure is logged and counted (cexec_audit_write_errors_total)
// as well as returned: callers whose action already happened go on.
func (l *Log) Record(ctx context.Context, tenant string, events ...Event) error {
	if l == nil || len(events) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := l.withDir(tenant, func(dir *os.Root) error { return l.append(dir, tenant, events) })
	if err != nil {
		metrics.AuditError(tenant)
		l.o.Logger.Error("audit log write failed", "tenant", tenant, "events", len(events), "error", err)
		return fmt.Errorf("audit log of tenant %q: %w", tenant, err)
	}
	return nil
}

// Forget drops what is cached about tenant's log (its folder was removed).
func (l *Log) Forget(tenant string) {
	l.mu.Lock()
	delete(l.chains, tenant)
	l.mu.Unlock()
}

func (l *Log) withDir(tenant string, fn func(*os.Root) error) error {
	if tenant != "" {
		if l.o.Tenants == nil {
			return errors.New("no tenant workspaces")
		}
		return l.o.Tenants.WithAuditDir(tenant, fn)
	}
	if err := os.MkdirAll(l.o.DaemonDir, 0o700); err != nil {
		return err
	}
	dir, err := os.OpenRoot(l.o.DaemonDir)
	if err != nil {
		return err
	}
	defer dir.Close()
	return fn(dir)
}

func (l *Log) chainOf(tenant string) *chain {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.chains[tenant]
	if c == nil {
		c = &chain{}
		l.chains[tenant] = c
	}
	return c
}

func (l *Log) append(dir *os.Root, tenant string, events []Event) error {
	c := l.chainOf(tenant)
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.o.Shared {
		unlock, err := lockDir(dir)
		if err != nil {
			return err
		}
		defer unlock()
		// Another replica may have appended or rotated since.
		seq, hash := c.seq, c.hash
		if err := l.load(dir, tenant, c); err != nil {
			return err
		}
		if c.seq < seq {
			// Lines this process wrote were removed: continue after them,
			// so that verify shows the gap, as with one cexecd.
			c.seq, c.hash = seq, hash
		}
	} else if !c.loaded {
		if err := l.load(dir, tenant, c); err != nil {
			return err
		}
	}
	var buf []byte
	seq, hash := c.seq, c.hash
	for _, e := range events {
		if e.Time.IsZero() {
			e.Time = l.o.Now()
		}
		e.Time = e.Time.UTC()
		if len(e.Reason) > maxReason {
			e.Reason = e.Reason[:maxReason] + "…"
		}
		seq++
		line, h, err := encode(&record{Seq: seq, Prev: hash, Tenant: tenant, Event: e})
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		buf = append(buf, line...)
		hash = h
	}
	if c.size > 0 && c.size+int64(len(buf)) > l.o.RotateSize {
		if err := l.rotate(dir, c); err != nil {
			return err
		}
	}
	// O_NONBLOCK does nothing to a regular file; it spares the four
	// fcntl(2) calls with which package os would make the descriptor
	// non-blocking for the poller and back after epoll refuses it.
	f, err := dir.OpenFile(current, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(buf); err != nil {
		// Take back a partial write so the chain's next line starts clean.
		_ = f.Truncate(c.size)
		return err
	}
	if l.o.Sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if c.size == 0 {
		c.first = c.seq + 1
	}
	c.seq, c.hash, c.size = seq, hash, c.size+int64(len(buf))
	return nil
}

// load finds the chain's end: the current file's last line, else the
// newest rotated file's. A torn last line (a crash mid-write, never
// acknowledged) is cut off.
func (l *Log) load(dir *os.Root, tenant string, c *chain) error {
	c.seq, c.hash, c.size, c.first = 0, zeroHash, 0, 0
	files, err := chainFiles(dir)
	if err != nil {
		return err
	}
	for i := len(files) - 1; i >= 0; i-- {
		line, end, size, err := lastLine(dir, files[i])
		if err != nil {
			return err
		}
		if files[i] == current {
			if end < size {
				if err := l.cut(dir, end); err != nil {
					return err
				}
				l.o.Logger.Warn("cut a torn last line from an audit log", "tenant", tenant, "bytes", size-end)
			}
			c.size = end
			c.first = firstSeqOf(dir, current)
		}
		if line == nil {
			continue
		}
		d, err := decode(line)
		if err != nil {
			// Appending after a broken line would hide where the chain
			// broke; verify says where, and the operator decides.
			return fmt.Errorf("the last line of %s does not verify (%v); run cexecctl audit verify", files[i], err)
		}
		c.seq, c.hash = d.seq, d.hash
		break
	}
	c.loaded = true
	return nil
}

func (l *Log) cut(dir *os.Root, end int64) error {
	f, err := dir.OpenFile(current, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(end)
}

// lockName is the file replicas flock to append to a log in turn.
const lockName = "audit.lock"

// lockDir takes the log folder's lock; closing the file releases it.
func lockDir(dir *os.Root) (unlock func(), err error) {
	f, err := dir.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the audit log: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the audit log: %w", err)
	}
	return func() { f.Close() }, nil
}

// rotate renames the current file after its first seq and removes rotated
// files beyond Keep.
func (l *Log) rotate(dir *os.Root, c *chain) error {
	if err := dir.Rename(current, rotatedName(c.first)); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	c.size = 0
	files, err := chainFiles(dir)
	if err != nil {
		return err
	}
	for len(files) > l.o.Keep && len(files) > 0 {
		if err := dir.Remove(files[0]); err != nil {
			return fmt.Errorf("remove rotated %s: %w", filepath.Base(files[0]), err)
		}
		files = files[1:]
	}
	return nil
}
