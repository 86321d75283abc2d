package workspace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi"
)

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

// ListSessions returns the tenant's sessions, most recently active first. It
// reads one small summary per session, not the logs.
func (t *Tenant) ListSessions() ([]SessionInfo, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	// Through the folder's root: reading each summary is one openat.
	dir := t.sessions
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

// SessionInterpreter is the sandbox whose persistent interpreter ran the
// session's last execution that kept its globals (Entry.Interpreter), ""
// when none did or the session has no log. It reads the session's summary,
// rebuilt when appends (another replica's, say) have outrun it.
func (t *Tenant) SessionInterpreter(session string) (string, error) {
	if err := ValidateSessionID(session); err != nil {
		return "", err
	}
	if err := t.enter(); err != nil {
		return "", err
	}
	defer t.exit()
	mu := t.sessionLock(session)
	mu.Lock()
	defer mu.Unlock()
	f, err := t.openLog(session)
	if errors.Is(err, pluginapi.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	meta, err := t.currentMeta(session, f)
	if err != nil {
		return "", err
	}
	return meta.Interpreter, nil
}

// openLog opens a session's log for reading.
func (t *Tenant) openLog(session string) (*os.File, error) {
	f, err := t.sessions.Open(session + logSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session %s: %w", session, pluginapi.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant %s: open session %s: %w", t.id, session, err)
	}
	return f, nil
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
			perr = fmt.Errorf("line longer than %s", bytesize.Format(maxLine))
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
