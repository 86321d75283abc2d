package workspace

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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

// Limits of one log entry. Long text is cut (Entry.Truncated says so) so
// that a line stays small enough to append in one write; a checkpoint
// context is data to resume from, so an oversized one is refused instead.
const (
	maxEntryText      = 64 << 10
	maxEntryList      = 1000
	MaxCheckpointSize = 1 << 20
	recentEntries     = 5
)

var kindRE = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// Entry is one line of a session log.
type Entry struct {
	// Seq numbers a session's entries from 1; Append sets it.
	Seq int64 `json:"seq"`
	// Time defaults to the time of the append.
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Task is the task description of execute_task, if any.
	Task string `json:"task,omitempty"`
	// Code is the program that ran.
	Code      string     `json:"code,omitempty"`
	Result    *Result    `json:"result,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Duration  Duration   `json:"duration_ms,omitempty"`
	// StateFiles are the state files the execution added, changed or
	// removed.
	StateFiles []string `json:"state_files,omitempty"`
	// Step and Context are a checkpoint's.
	Step    string          `json:"step,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
	// Skill names a skill saved during the session.
	Skill string `json:"skill,omitempty"`
	// Truncated is set when long text or lists were cut to fit the log.
	Truncated bool `json:"truncated,omitempty"`
}

// Result summarises how an execution ended.
type Result struct {
	OK        bool   `json:"ok"`
	ExitCode  int    `json:"exit_code,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Error     string `json:"error,omitempty"`
	// Output is what the program printed (as the agent saw it), cut to
	// 64 KiB.
	Output string `json:"output,omitempty"`
	// Value is what the program passed to cexec.result(); dropped when over
	// 64 KiB.
	Value    json.RawMessage `json:"value,omitempty"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// ToolCall records one upstream tool call of an execution.
type ToolCall struct {
	Server   string   `json:"server"`
	Tool     string   `json:"tool"`
	Duration Duration `json:"duration_ms"`
	OK       bool     `json:"ok"`
	Error    string   `json:"error,omitempty"`
}

// Duration is a time.Duration written to logs as (fractional) milliseconds,
// which people read more easily than nanoseconds.
type Duration time.Duration

// MarshalJSON writes milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%g", float64(d)/float64(time.Millisecond))), nil
}

// UnmarshalJSON reads milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// SessionInfo summarises a session.
type SessionInfo struct {
	ID           string    `json:"id"`
	Created      time.Time `json:"created"`
	LastActivity time.Time `json:"last_activity"`
	Entries      int64     `json:"entries"`
	Executions   int64     `json:"executions"`
	// Failures counts executions whose Result was not OK.
	Failures    int64 `json:"failures"`
	Checkpoints int64 `json:"checkpoints"`
	// LastTask is the task (or first code line) of the last execution,
	// cut to 200 characters.
	LastTask string `json:"last_task,omitempty"`
	// LastStep is the step of the last checkpoint.
	LastStep string `json:"last_step,omitempty"`
	// StateFiles are the state files the session's executions touched
	// (the first 100).
	StateFiles []string `json:"state_files,omitempty"`
	// LogBytes is the size of the log.
	LogBytes int64 `json:"log_bytes"`
	// BadLines counts lines that could not be read: a torn last line left
	// by a crash, until the next append repairs it, or damage.
	BadLines int64 `json:"bad_lines,omitempty"`
}

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
}

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
				session, humanBytes(int64(len(e.Context))), humanBytes(MaxCheckpointSize), ErrTooLarge)
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

	logName := sessionsDir + "/" + session + logSuffix
	f, err := t.root.OpenFile(logName, os.O_WRONLY|os.O_APPEND, 0)
	created := errors.Is(err, fs.ErrNotExist)
	if created {
		f, err = t.root.OpenFile(logName, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
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
	if _, err := f.Write(line); err != nil {
		// Take back a partial line so the next append starts clean.
		_ = f.Truncate(meta.End)
		return Entry{}, fmt.Errorf("tenant %s: append to session log %s: %w", t.id, session, err)
	}
	switch t.m.opts.Sync {
	case SyncAlways:
		err := f.Sync()
		if err == nil && created {
			err = syncDir(t.root, sessionsDir) // the new log's name must survive too
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

// Checkpoint records a step of a session and the context needed to resume
// from it (any JSON value, at most 1 MiB; empty means null).
func (t *Tenant) Checkpoint(session, step string, context json.RawMessage) (Entry, error) {
	if err := validateStep(step); err != nil {
		return Entry{}, err
	}
	if len(bytes.TrimSpace(context)) == 0 {
		context = json.RawMessage("null")
	}
	return t.Append(session, Entry{Kind: KindCheckpoint, Step: step, Context: context})
}

func validateStep(step string) error {
	if step == "" || len(step) > 200 || !utf8.ValidString(step) || strings.ContainsFunc(step, isControl) {
		return fmt.Errorf("invalid checkpoint step %q: use 1-200 characters of text without control characters: %w",
			clip(step), pluginapi.ErrInvalidArgument)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// ListSessions returns the tenant's sessions, most recently active first. It
// reads one small summary per session, not the logs.
func (t *Tenant) ListSessions() ([]SessionInfo, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	// One root for the folder: reading each summary is then one openat.
	dir, err := t.root.OpenRoot(sessionsDir)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list sessions: %w", t.id, err)
	}
	defer dir.Close()
	d, err := dir.Open(".")
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list sessions: %w", t.id, err)
	}
	// Names only: a stat per log, none per summary.
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list sessions: %w", t.id, err)
	}
	var out []SessionInfo
	buf := make([]byte, 0, 4096)
	for _, name := range names {
		id, ok := strings.CutSuffix(name, logSuffix)
		if !ok || ValidateSessionID(id) != nil {
			continue
		}
		info, err := dir.Lstat(name)
		if err != nil {
			continue // removed meanwhile
		}
		meta, pending := t.pending.meta(id)
		if !pending {
			buf, err = readSmall(dir, id+metaSuffix, buf)
			if err == nil {
				meta, err = parseMeta(buf, id)
			}
		}
		if err != nil || meta.LogBytes != info.Size() {
			if meta, err = t.refreshMeta(id); err != nil {
				return nil, err
			}
		}
		out = append(out, meta.SessionInfo)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int {
		if c := b.LastActivity.Compare(a.LastActivity); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// SessionLog is a whole session log as read.
type SessionLog struct {
	Info    SessionInfo
	Entries []Entry
	// Problems lists lines that were skipped.
	Problems []LineProblem
}

// LineProblem is a log line that could not be read.
type LineProblem struct {
	// Line is 1-based; Offset is in bytes.
	Line   int64
	Offset int64
	// Torn is set for an incomplete last line, which a crash mid-append
	// leaves; it never held an acknowledged entry.
	Torn bool
	Err  string
}

// ReadSession reads a session's whole log. Unreadable lines are skipped and
// reported in Problems; they never hide the lines around them.
func (t *Tenant) ReadSession(session string) (SessionLog, error) {
	if err := ValidateSessionID(session); err != nil {
		return SessionLog{}, err
	}
	if err := t.enter(); err != nil {
		return SessionLog{}, err
	}
	defer t.exit()
	f, err := t.openLog(session)
	if err != nil {
		return SessionLog{}, err
	}
	defer f.Close()
	var out SessionLog
	meta, err := scanLog(session, f, func(e *Entry, _ int64) { out.Entries = append(out.Entries, *e) },
		func(p LineProblem) { out.Problems = append(out.Problems, p) })
	if err != nil {
		return SessionLog{}, fmt.Errorf("tenant %s: read session %s: %w", t.id, session, err)
	}
	out.Info = meta.SessionInfo
	return out, nil
}

// Resumption is what an agent needs to pick a session up again.
type Resumption struct {
	Session SessionInfo
	// Checkpoint is the last checkpoint, nil when there is none.
	Checkpoint *Entry
	// Recent are the last few entries, oldest first.
	Recent []Entry
}

// Resume returns a session's last checkpoint, its summary and its last
// entries. It reads the summary and single lines, not the whole log.
func (t *Tenant) Resume(session string) (Resumption, error) {
	if err := ValidateSessionID(session); err != nil {
		return Resumption{}, err
	}
	if err := t.enter(); err != nil {
		return Resumption{}, err
	}
	defer t.exit()
	f, err := t.openLog(session)
	if err != nil {
		return Resumption{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Resumption{}, err
	}
	meta, err := t.readMeta(session)
	if err != nil || meta.LogBytes != st.Size() {
		if meta, err = t.refreshMeta(session); err != nil {
			return Resumption{}, err
		}
	}
	out := Resumption{Session: meta.SessionInfo}
	if meta.CheckpointAt >= 0 {
		e, err := readEntryAt(f, meta.CheckpointAt)
		if err != nil {
			return Resumption{}, fmt.Errorf("tenant %s: session %s: read checkpoint: %w", t.id, session, err)
		}
		out.Checkpoint = &e
	}
	for _, off := range meta.Recent {
		e, err := readEntryAt(f, off)
		if err != nil {
			return Resumption{}, fmt.Errorf("tenant %s: session %s: read entry: %w", t.id, session, err)
		}
		out.Recent = append(out.Recent, e)
	}
	return out, nil
}

func (t *Tenant) openLog(session string) (*os.File, error) {
	f, err := t.root.Open(sessionsDir + "/" + session + logSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session %s: %w", session, pluginapi.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant %s: open session %s: %w", t.id, session, err)
	}
	return f, nil
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
	r, err := t.root.Open(sessionsDir + "/" + session + logSuffix)
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
	return readMeta(t.root, sessionsDir+"/"+session)
}

// readMeta reads the summary at prefix+".meta.json" inside root.
func readMeta(root *os.Root, prefix string) (sessionMeta, error) {
	data, err := root.ReadFile(prefix + metaSuffix)
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
// close, without the stat os.ReadFile does first.
func readSmall(root *os.Root, name string, buf []byte) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
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
	if err := writeAtomic(t.root, sessionsDir, meta.ID+metaSuffix, mustJSON(meta), atomicWrite{}); err != nil {
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

// maxLine bounds a line readers accept; Append writes far shorter ones.
const maxLine = 8 << 20

// scanLog reads a log from the start and returns its summary. It calls
// entry for each readable entry and problem for each skipped line (either
// may be nil). A last line without a newline is a torn append.
func scanLog(session string, r io.Reader, entry func(*Entry, int64), problem func(LineProblem)) (sessionMeta, error) {
	meta := newMeta(session)
	br := bufio.NewReaderSize(r, 64<<10)
	var off, lineNo int64
	for {
		line, n, err := readLine(br)
		if n == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return meta, err
		}
		lineNo++
		complete := err == nil // ReadSlice found the newline
		var e Entry
		var perr error
		switch {
		case !complete:
			perr = errors.New("torn last line (an append interrupted by a crash)")
		case line == nil:
			perr = fmt.Errorf("line longer than %s", humanBytes(maxLine))
		default:
			perr = json.Unmarshal(line, &e)
		}
		if perr == nil {
			meta.apply(&e, off, n)
			if entry != nil {
				entry(&e, off)
			}
		} else {
			meta.BadLines++
			if problem != nil {
				problem(LineProblem{Line: lineNo, Offset: off, Torn: !complete, Err: perr.Error()})
			}
			if complete {
				meta.End = off + n
			}
		}
		off += n
		if !complete {
			break
		}
	}
	meta.LogBytes = off
	return meta, nil
}

// readLine reads one line, newline included, and its length in bytes. A line
// longer than maxLine is consumed but returned as nil. The returned slice is
// valid until the next read.
func readLine(br *bufio.Reader) ([]byte, int64, error) {
	frag, err := br.ReadSlice('\n')
	n := int64(len(frag))
	if !errors.Is(err, bufio.ErrBufferFull) {
		return frag, n, err
	}
	full := append([]byte(nil), frag...)
	for errors.Is(err, bufio.ErrBufferFull) {
		frag, err = br.ReadSlice('\n')
		n += int64(len(frag))
		if n <= maxLine {
			full = append(full, frag...)
		}
	}
	if n > maxLine {
		full = nil
	}
	return full, n, err
}

// readEntryAt reads the entry on the line starting at off.
func readEntryAt(f *os.File, off int64) (Entry, error) {
	br := bufio.NewReader(io.NewSectionReader(f, off, maxLine))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	err = json.Unmarshal(line, &e)
	return e, err
}

// marshalLine encodes an entry as one line, without escaping <, > and & so
// logged code stays readable.
func marshalLine(e *Entry) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil // Encode ends with exactly one newline
}

// capEntry cuts an entry's text and lists to the log's limits.
func capEntry(e *Entry) {
	cut := func(s *string) {
		if len(*s) > maxEntryText {
			*s = cutText(*s, maxEntryText) + "…[truncated]"
			e.Truncated = true
		}
	}
	cut(&e.Task)
	cut(&e.Code)
	if r := e.Result; r != nil {
		rc := *r
		e.Result = &rc
		cut(&rc.Error)
		cut(&rc.Output)
		if len(rc.Value) > maxEntryText || (len(rc.Value) > 0 && !validJSON(rc.Value)) {
			rc.Value = nil
			e.Truncated = true
		}
	}
	if len(e.ToolCalls) > maxEntryList {
		e.ToolCalls = e.ToolCalls[:maxEntryList]
		e.Truncated = true
	}
	e.ToolCalls = slices.Clone(e.ToolCalls) // cut below without touching the caller's
	if len(e.StateFiles) > maxEntryList {
		e.StateFiles = e.StateFiles[:maxEntryList]
		e.Truncated = true
	}
	for i := range e.ToolCalls {
		if len(e.ToolCalls[i].Error) > 1024 {
			e.ToolCalls[i].Error = cutText(e.ToolCalls[i].Error, 1024) + "…"
			e.Truncated = true
		}
	}
}

// cutText shortens s to at most n bytes without splitting a UTF-8 sequence.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
