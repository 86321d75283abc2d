package workspace

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stateEvents are the inotify events that add, change or remove a state
// file, whether sandboxed code or cexecd made the change.
const stateEvents = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE

// maxTracked bounds the names a watched folder remembers; past it the
// folder counts as changed wholesale, as after lost events.
const maxTracked = 1 << 16

// stateWatcher tells which files of the tenants' state folders changed
// between two points of time from one inotify instance for all tenants, so
// that an execution costs time in the changes made while it ran, not in
// the files its tenant keeps (a listing with a stat per file took 11 ms at
// 5,000 state files, twice per execution). Events are read synchronously:
// the kernel queues them when the change happens, so draining the queue
// at Finish sees every change made before it.
type stateWatcher struct {
	mu   sync.Mutex
	fd   int
	seq  uint64
	byWD map[int32]*stateLog
	buf  []byte
}

// stateLog is one state folder's changes, by name, with the sequence
// number of the last event that named each.
type stateLog struct {
	dir     string
	wd      int32 // -1 while not watched (the folder was removed or moved)
	changed map[string]uint64
	// lostAt is the sequence number at which changes may have gone
	// unrecorded (queue overflow, the folder replaced, the map full).
	lostAt uint64
}

func newStateWatcher() (*stateWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &stateWatcher{fd: fd, byWD: map[int32]*stateLog{}, buf: make([]byte, 64<<10)}, nil
}

// watch starts recording the changes in dir.
func (w *stateWatcher) watch(dir string) (*stateLog, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := &stateLog{dir: dir, wd: -1, changed: map[string]uint64{}}
	if err := w.addLocked(l); err != nil {
		return nil, err
	}
	return l, nil
}

// addLocked (re)places the watch of l. The last component is not
// followed: sandboxed code may replace the folder by a symlink.
func (w *stateWatcher) addLocked(l *stateLog) error {
	wd, err := unix.InotifyAddWatch(w.fd, l.dir, stateEvents|unix.IN_DONT_FOLLOW|unix.IN_ONLYDIR)
	if err != nil {
		return err
	}
	l.wd = int32(wd)
	w.byWD[l.wd] = l
	return nil
}

// unwatch stops recording l's changes.
func (w *stateWatcher) unwatch(l *stateLog) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.wd >= 0 {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(l.wd))
		delete(w.byWD, l.wd)
		l.wd = -1
	}
}

// mark returns the point from which since counts changes of l.
func (w *stateWatcher) mark(l *stateLog) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	if l.wd < 0 && w.addLocked(l) == nil {
		// A recreated folder: what it holds came after the loss.
		l.lostAt = w.seq
	}
	return w.seq
}

// since returns the names changed in l after mark, sorted; complete is
// false when changes may have gone unrecorded since then.
func (w *stateWatcher) since(l *stateLog, mark uint64) (names []string, complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	for name, seq := range l.changed {
		if seq > mark {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, l.lostAt <= mark
}

func (w *stateWatcher) drainLocked() {
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				w.loseAllLocked()
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			name := w.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.seq++
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.loseAllLocked()
				continue
			}
			l := w.byWD[ev.Wd]
			if l == nil {
				continue
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				// The folder itself was removed or moved away.
				delete(w.byWD, ev.Wd)
				l.wd, l.lostAt = -1, w.seq
				continue
			}
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if len(name) == 0 || name[0] == '.' || ev.Mask&unix.IN_ISDIR != 0 {
				continue // the folder's own events, temp files, subfolders
			}
			if len(l.changed) >= maxTracked {
				clear(l.changed)
				l.lostAt = w.seq
			}
			l.changed[string(name)] = w.seq
		}
	}
}

func (w *stateWatcher) loseAllLocked() {
	w.seq++
	for _, l := range w.byWD {
		l.lostAt = w.seq
	}
}

func (w *stateWatcher) close() error {
	return unix.Close(w.fd)
}

// stateDirOf is the host path of a tenant's state folder.
func stateDirOf(t *Tenant) string {
	return filepath.Join(t.dir, "workspace", stateDir)
}
