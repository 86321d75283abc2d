package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cexec/cexec/pluginapi"
)

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
