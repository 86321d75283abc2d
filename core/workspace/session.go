package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi"
)

// Session logs live in DataDir/tenants/<id>/sessions, outside the workspace,
// so sandboxed code can neither read nor forge them: <session>.jsonl is the
// log (one JSON entry per line, append-only) and <session>.meta.json a small
// summary rewritten after each append, so listing sessions does not read
// logs. The summary is only a cache: it records the log size it describes
// and is rebuilt from the log whenever that does not match.
const (
	sessionsDir = "sessions"
	logSuffix   = ".jsonl"
	metaSuffix  = ".meta.json"
)

// Entry kinds written by this package; callers may add their own
// (lowercase letters and _).
const (
	KindExecution  = "execution"
	KindCheckpoint = "checkpoint"
	KindSkill      = "skill"
)

// NewSessionID returns a fresh session id: the UTC time, so ids sort by
// creation, and 64 random bits.
func NewSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Append adds an entry to a session's log, creating the session on first
// use, and returns it with Seq and Time set. The line goes out in one
// write(2) on an O_APPEND descriptor: once acknowledged it survives a kill
// -9 of cexecd, and a power cut once fsynced (before Append returns with
// SyncAlways, by the next background pass with SyncBatched). A crash
// mid-write can leave only a torn last line, which readers skip and the next
// Append cuts off, so earlier lines are never damaged.
func (t *Tenant) Append(session string, e Entry) (Entry, error) {
	if err := ValidateSessionID(session); err != nil {
		return Entry{}, err
	}
	if !kindRE.MatchString(e.Kind) {
		return Entry{}, fmt.Errorf("session %s: invalid entry kind %q: %w", session, clip(e.Kind), pluginapi.ErrInvalidArgument)
	}
	if e.Time.IsZero() {
		e.Time = t.m.now()
	}
	e.Time = e.Time.UTC()
	if len(e.Context) > 0 {
		if len(e.Context) > MaxCheckpointSize {
			return Entry{}, fmt.Errorf("session %s: checkpoint context is %s; the limit is %s: %w",
				session, bytesize.Format(int64(len(e.Context))), bytesize.Format(MaxCheckpointSize), ErrTooLarge)
		}
		if !validJSON(e.Context) {
			return Entry{}, fmt.Errorf("session %s: checkpoint context is not valid JSON: %w", session, pluginapi.ErrInvalidArgument)
		}
	}
	capEntry(&e)

	if err := t.enter(); err != nil {
		return Entry{}, err
	}
	defer t.exit()
	mu := t.sessionLock(session)
	mu.Lock()
	defer mu.Unlock()

	logName := session + logSuffix
	f, err := t.sessions.OpenFile(logName, appendFlags, 0)
	created := errors.Is(err, fs.ErrNotExist)
	if created {
		f, err = t.sessions.OpenFile(logName, appendFlags|os.O_CREATE, 0o600)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("tenant %s: open session log %s: %w", t.id, session, err)
	}
	defer f.Close()
	meta, err := t.currentMeta(session, f)
	if err != nil {
		return Entry{}, err
	}
	if meta.LogBytes > meta.End {
		// A torn line from a crash: it was never acknowledged, and
		// appending after it would glue it to the new line.
		if err := f.Truncate(meta.End); err != nil {
			return Entry{}, fmt.Errorf("tenant %s: repair session log %s: %w", t.id, session, err)
		}
		t.m.log.Warn("cut a torn last line from a session log", "tenant", t.id, "session", session,
			"bytes", meta.LogBytes-meta.End)
		meta.BadLines--
		meta.LogBytes = meta.End
	}

	e.Seq = meta.LastSeq + 1
	line, err := marshalLine(&e)
	if err != nil {
		return Entry{}, fmt.Errorf("session %s: encode entry: %w", session, err)
	}
	// O(1): the meta knows the log's size. Nothing is written over the
	// bound, so the session takes no new entries; a new session starts
	// empty.
	if max := t.Quota().maxSessionLog(); meta.End+int64(len(line)) > max {
		return Entry{}, fmt.Errorf("tenant %s: session %s's log holds %s; this %s entry would take it over its %s limit (max_session_log); nothing was written; start a new session: %w",
			t.id, session, bytesize.Format(meta.End), bytesize.Format(int64(len(line))), bytesize.Format(max), ErrQuotaExceeded)
	}
	if e.Kind != KindExecution && t.mode == DiskModeImage {
		// An execution's entry may use the reserve only cexecd writes to,
		// so it says the quota is full; nothing else may.
		if err := t.overQuota(); err != nil {
			return Entry{}, fmt.Errorf("session %s: nothing was written: %w", session, err)
		}
	}
	if _, err := f.Write(line); err != nil {
		// Take back a partial line so the next append starts clean.
		_ = f.Truncate(meta.End)
		return Entry{}, fmt.Errorf("tenant %s: append to session log %s: %w", t.id, session, err)
	}
	switch t.m.opts.Sync {
	case SyncAlways:
		err := f.Sync()
		if err == nil && created {
			err = syncDir(t.sessions, ".") // the new log's name must survive too
		}
		if err != nil {
			return Entry{}, fmt.Errorf("tenant %s: sync session log %s: %w", t.id, session, err)
		}
	case SyncBatched:
		t.pending.addLog(session, created)
	}
	meta.apply(&e, meta.End, int64(len(line)))
	t.storeMeta(&meta)
	t.touch()
	return e, nil
}

// createLog creates a session's log if it is new, before a program can
// take the image's last inode: ext4 keeps blocks, not inodes, for root, and
// the execution's entry must land even when the program used every file.
// A session's later executions find it with one stat.
func (t *Tenant) createLog(session string) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	if fi, err := t.sessions.Lstat(session + logSuffix); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	f, err := t.sessions.OpenFile(session+logSuffix, appendFlags|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("tenant %s: create session log %s: %w", t.id, session, err)
	}
	return f.Close()
}

// appendFlags open a session log for appending. O_NONBLOCK, which does
// nothing to a regular file, spares each open the four fcntl(2) calls with
// which package os would make the descriptor non-blocking for the poller and
// back after epoll refuses it: an execution opens its log (twice for a new
// session in image mode) and its summary, the background pass both again.
// Every file cexecd opens on that path has it.
const appendFlags = os.O_WRONLY | os.O_APPEND | syscall.O_NONBLOCK

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
