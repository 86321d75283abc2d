package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// sessionMeta is the .meta.json file: the summary plus offsets that let
// Resume read single lines.
type sessionMeta struct {
	SessionInfo
	LastSeq int64 `json:"last_seq"`
	// End is the offset after the last complete line; a longer log has a
	// torn tail from a crash.
	End          int64   `json:"end"`
	CheckpointAt int64   `json:"checkpoint_at"` // -1: none
	Recent       []int64 `json:"recent"`
	// Interpreter is the last Entry.Interpreter.
	Interpreter string `json:"interpreter,omitempty"`
}

// currentMeta returns the summary of the log open in f, rebuilding it when it
// does not describe the log's current size. Called with the session locked.
func (t *Tenant) currentMeta(session string, f *os.File) (sessionMeta, error) {
	st, err := f.Stat()
	if err != nil {
		return sessionMeta{}, err
	}
	if meta, err := t.readMeta(session); err == nil && meta.LogBytes == st.Size() {
		return meta, nil
	}
	r, err := t.sessions.Open(session + logSuffix)
	if err != nil {
		return sessionMeta{}, err
	}
	defer r.Close()
	meta, err := scanLog(session, r, nil, nil)
	if err != nil {
		return sessionMeta{}, fmt.Errorf("tenant %s: scan session log %s: %w", t.id, session, err)
	}
	return meta, nil
}

// refreshMeta rebuilds and stores a stale summary.
func (t *Tenant) refreshMeta(session string) (sessionMeta, error) {
	mu := t.sessionLock(session)
	mu.Lock()
	defer mu.Unlock()
	f, err := t.openLog(session)
	if err != nil {
		return sessionMeta{}, err
	}
	defer f.Close()
	meta, err := t.currentMeta(session, f)
	if err != nil {
		return sessionMeta{}, err
	}
	t.storeMeta(&meta)
	return meta, nil
}

// readMeta returns the newest summary of a session: the one waiting to be
// written, else the file.
func (t *Tenant) readMeta(session string) (sessionMeta, error) {
	if m, ok := t.pending.meta(session); ok {
		return m, nil
	}
	return readMeta(t.sessions, session)
}

// readMeta reads the summary at prefix+".meta.json" inside root.
func readMeta(root *os.Root, prefix string) (sessionMeta, error) {
	data, err := readSmall(root, prefix+metaSuffix, nil)
	if err != nil {
		return sessionMeta{}, err
	}
	return parseMeta(data, path.Base(prefix))
}

func parseMeta(data []byte, session string) (sessionMeta, error) {
	var meta sessionMeta
	err := json.Unmarshal(data, &meta)
	if err == nil && meta.ID != session {
		err = errors.New("summary of another session")
	}
	return meta, err
}

// readSmall reads a small file into buf, reusing its memory: open, read,
// close, without the stat os.ReadFile does first, and opened with
// O_NONBLOCK (see appendFlags).
func readSmall(root *os.Root, name string, buf []byte) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
	if cap(buf) == 0 {
		buf = make([]byte, 0, 512) // a summary: one read and the EOF
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// storeMeta keeps a new summary: with SyncBatched, written by the next
// background pass (readMeta sees it meanwhile), else at once. Called with
// the session locked.
func (t *Tenant) storeMeta(meta *sessionMeta) {
	if t.m.opts.Sync != SyncBatched {
		t.writeMeta(meta)
		return
	}
	t.pending.putMeta(meta)
}

// flushMeta writes a session's pending summary, if any.
func (t *Tenant) flushMeta(session string) {
	mu := t.sessionLock(session)
	mu.Lock()
	defer mu.Unlock()
	m, ok := t.pending.meta(session)
	if !ok {
		return
	}
	t.writeMeta(&m)
	t.pending.dropMeta(&m)
}

// writeMeta stores a summary without fsync: it is a cache, checked against
// the log's size on every read.
func (t *Tenant) writeMeta(meta *sessionMeta) {
	if err := writeAtomic(t.sessions, ".", meta.ID+metaSuffix, mustJSON(meta), atomicWrite{}); err != nil {
		t.m.log.Warn("write session summary", "tenant", t.id, "session", meta.ID, "error", err)
	}
}

// clone returns a copy sharing no memory with m.
func (m *sessionMeta) clone() sessionMeta {
	c := *m
	c.StateFiles = slices.Clone(m.StateFiles)
	c.Recent = slices.Clone(m.Recent)
	return c
}

func newMeta(session string) sessionMeta {
	return sessionMeta{SessionInfo: SessionInfo{ID: session}, CheckpointAt: -1}
}

// apply adds an entry at offset off, n bytes long, to the summary.
func (m *sessionMeta) apply(e *Entry, off, n int64) {
	if m.Entries == 0 {
		m.Created = e.Time
	}
	m.Entries++
	m.LastSeq = max(m.LastSeq, e.Seq)
	if e.Interpreter != "" {
		m.Interpreter = e.Interpreter
	}
	if e.Time.After(m.LastActivity) {
		m.LastActivity = e.Time
	}
	switch e.Kind {
	case KindExecution:
		m.Executions++
		if e.Result != nil && !e.Result.OK {
			m.Failures++
		}
		task := e.Task
		if task == "" {
			task, _, _ = strings.Cut(strings.TrimSpace(e.Code), "\n")
		}
		m.LastTask = cutText(task, 200)
	case KindCheckpoint:
		m.Checkpoints++
		m.LastStep = e.Step
		m.CheckpointAt = off
	}
	for _, s := range e.StateFiles {
		if len(m.StateFiles) >= 100 {
			break
		}
		if i, found := slices.BinarySearch(m.StateFiles, s); !found {
			m.StateFiles = slices.Insert(m.StateFiles, i, s)
		}
	}
	m.Recent = append(m.Recent, off)
	if len(m.Recent) > recentEntries {
		m.Recent = m.Recent[len(m.Recent)-recentEntries:]
	}
	m.End = off + n
	m.LogBytes = m.End
}
