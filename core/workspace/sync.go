package workspace

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// SyncPolicy says how writes reach stable storage. Whatever the policy, a
// write that returned survives a crash of cexecd (kill -9): the data is in
// the kernel's page cache. The policies differ on a power cut.
type SyncPolicy int

const (
	// SyncBatched is the default. A state file's content is fsynced before
	// it is renamed into place, so a save is atomic and its bytes are on
	// disk when it returns. Folder entries (the rename, a new session log,
	// a deletion) and session log lines are fsynced by a background pass
	// every Options.SyncInterval: after a power cut a state file holds its
	// previous or its new content, never a mix, and at most the last
	// interval's changes are missing.
	SyncBatched SyncPolicy = iota
	// SyncAlways fsyncs the file and its folder before every state write,
	// deletion and session log append returns: every acknowledged write
	// survives a power cut, for about a millisecond per write.
	SyncAlways
	// SyncNone leaves flushing state and session logs to the kernel
	// (benchmarks that isolate the cost of fsync, and tests).
	SyncNone
)

// DefaultSyncInterval is how often SyncBatched flushes pending writes.
const DefaultSyncInterval = 200 * time.Millisecond

// fileSync is how much of one atomic write is fsynced before it returns.
type fileSync int

const (
	syncNothing    fileSync = iota
	syncFile                // the temporary file, before the rename
	syncFileAndDir          // and the folder, after it
)

// stateWrite is what a state write fsyncs itself under p.
func (p SyncPolicy) stateWrite() fileSync {
	switch p {
	case SyncAlways:
		return syncFileAndDir
	case SyncBatched:
		return syncFile
	}
	return syncNothing
}

// pending is what a tenant's next background pass must write or fsync.
type pending struct {
	mu       sync.Mutex
	logs     map[string]bool // session ids
	sessions bool            // the sessions folder (new logs)
	state    bool            // the state folder (renames, deletions)
	// metas are session summaries not yet written: one file write per
	// session and pass instead of one per append.
	metas map[string]sessionMeta
}

func (p *pending) putMeta(m *sessionMeta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.metas == nil {
		p.metas = map[string]sessionMeta{}
	}
	p.metas[m.ID] = m.clone()
}

func (p *pending) meta(session string) (sessionMeta, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.metas[session]
	if !ok {
		return sessionMeta{}, false
	}
	return m.clone(), true
}

func (p *pending) addLog(session string, created bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.logs == nil {
		p.logs = map[string]bool{}
	}
	p.logs[session] = true
	p.sessions = p.sessions || created
}

func (p *pending) addState() {
	p.mu.Lock()
	p.state = true
	p.mu.Unlock()
}

// take empties p of what must be fsynced and returns it.
func (p *pending) take() (logs map[string]bool, sessions, state bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	logs, sessions, state = p.logs, p.sessions, p.state
	p.logs, p.sessions, p.state = nil, false, false
	return logs, sessions, state
}

// dropMeta forgets the summary of session once it is m (and not a newer
// one, stored while m was written).
func (p *pending) dropMeta(m *sessionMeta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.metas[m.ID]; ok && cur.LogBytes == m.LogBytes {
		delete(p.metas, m.ID)
	}
}

// metaIDs lists the sessions whose summaries are pending.
func (p *pending) metaIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.metas))
	for id := range p.metas {
		ids = append(ids, id)
	}
	return ids
}

// flush writes the pending session summaries and fsyncs what the tenant's
// writes left pending. A tenant removed in the meantime has nothing left to
// flush.
func (t *Tenant) flush() error {
	ids := t.pending.metaIDs()
	logs, sessions, state := t.pending.take()
	if len(ids) == 0 && len(logs) == 0 && !sessions && !state {
		return nil
	}
	if t.enter() != nil {
		return nil
	}
	defer t.exit()
	for _, id := range ids {
		t.flushMeta(id)
	}
	var errs []error
	for session := range logs {
		f, err := t.sessions.OpenFile(session+logSuffix, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		errs = append(errs, err)
	}
	if sessions {
		errs = append(errs, syncDir(t.sessions, "."))
	}
	if state {
		errs = append(errs, syncDir(t.ws, stateDir))
	}
	return errors.Join(errs...)
}

// syncLoop runs the background passes of SyncBatched until stop closes.
func (m *Manager) syncLoop(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			m.flushAll()
		}
	}
}

// flushAll runs one background pass over every open tenant.
func (m *Manager) flushAll() {
	m.mu.Lock()
	tenants := make([]*Tenant, 0, len(m.tenants))
	for _, t := range m.tenants {
		tenants = append(tenants, t)
	}
	m.mu.Unlock()
	for _, t := range tenants {
		if err := t.flush(); err != nil {
			m.log.Warn("sync tenant writes to disk", "tenant", t.id, "error", err)
		}
	}
}
