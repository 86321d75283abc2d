package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi"
)

// stateDir is the state folder inside the workspace: /workspace/state in a
// sandbox, so sandboxed code and the host API see the same files.
const stateDir = "state"

// StateInfo describes a state file.
type StateInfo struct {
	Name string
	// Format is FormatJSON or FormatYAML, from the extension.
	Format   string
	Size     int64
	Modified time.Time
	// Version is set by saves: the StateVersion of what was written.
	Version string
}

// GetState returns a state file's value as JSON. A YAML file is converted
// (key order and number text kept); a JSON file is returned as stored after
// checking that it is valid, since sandboxed code may have written it.
func (t *Tenant) GetState(name string) (json.RawMessage, error) {
	format, err := ValidateStateName(name)
	if err != nil {
		return nil, err
	}
	data, err := t.readState(name)
	if err != nil {
		return nil, err
	}
	return t.stateValue(name, format, data)
}

// stateValue is a state file's stored bytes as JSON (see GetState).
func (t *Tenant) stateValue(name, format string, data []byte) (json.RawMessage, error) {
	if format == FormatYAML {
		out, err := yamlToJSON(data, 2*t.m.opts.MaxStateBytes)
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", name, err)
		}
		return out, nil
	}
	data = bytes.TrimSpace(data)
	if !t.valid.check(name, data) {
		return nil, fmt.Errorf("state %s holds invalid JSON (written by sandboxed code?); fix or delete it: %w", name, pluginapi.ErrInvalidArgument)
	}
	return data, nil
}

// SaveState stores a JSON value under name, as JSON or, for .yaml/.yml
// names, as YAML. The write is atomic (temporary file, fsync, rename; the
// folder is fsynced as Options.Sync says) and checked against the size limit and the
// disk quota first: on any error nothing was written.
func (t *Tenant) SaveState(name string, value json.RawMessage) (StateInfo, error) {
	return t.saveState(name, value, nil)
}

// saveState is SaveState, or SaveStateIf when version is set.
func (t *Tenant) saveState(name string, value json.RawMessage, version *string) (StateInfo, error) {
	format, err := ValidateStateName(name)
	if err != nil {
		return StateInfo{}, err
	}
	if err := t.checkStateSize(name, int64(len(value))); err != nil {
		return StateInfo{}, err
	}
	data := bytes.TrimSpace(value)
	if format == FormatYAML {
		if data, err = jsonToYAML(data); err != nil {
			return StateInfo{}, fmt.Errorf("state %s: %w: %w", name, err, pluginapi.ErrInvalidArgument)
		}
		return t.writeState(name, format, data, version, nil)
	}
	return t.writeState(name, format, data, version, func() error {
		if !validJSON(data) {
			return fmt.Errorf("state %s: the value is not valid JSON: %w", name, pluginapi.ErrInvalidArgument)
		}
		return nil
	})
}

// GetStateFile returns a state file's bytes as stored (for `cexecctl state
// get` of a YAML file, say).
func (t *Tenant) GetStateFile(name string) ([]byte, error) {
	if _, err := ValidateStateName(name); err != nil {
		return nil, err
	}
	return t.readState(name)
}

// PutStateFile stores data, which must already be in the format of the
// name's extension (valid JSON, or a YAML document JSON can represent), with
// the same guarantees as SaveState.
func (t *Tenant) PutStateFile(name string, data []byte) (StateInfo, error) {
	format, err := ValidateStateName(name)
	if err != nil {
		return StateInfo{}, err
	}
	if err := t.checkStateSize(name, int64(len(data))); err != nil {
		return StateInfo{}, err
	}
	if format == FormatYAML {
		if _, err := yamlToJSON(data, 2*t.m.opts.MaxStateBytes); err != nil {
			return StateInfo{}, fmt.Errorf("state %s: %w: %w", name, err, pluginapi.ErrInvalidArgument)
		}
		return t.writeState(name, format, data, nil, nil)
	}
	return t.writeState(name, format, data, nil, func() error {
		if !validJSON(data) {
			return fmt.Errorf("state %s: the data is not valid JSON: %w", name, pluginapi.ErrInvalidArgument)
		}
		return nil
	})
}

// ListState lists the state files the API can read (JSON and YAML with
// valid names), sorted by name. Other files sandboxed code keeps under
// /workspace/state are not listed.
func (t *Tenant) ListState() ([]StateInfo, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	d, err := t.ws.Open(stateDir)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list state: %w", t.id, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list state: %w", t.id, err)
	}
	var out []StateInfo
	for _, e := range entries {
		format, err := ValidateStateName(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, StateInfo{Name: e.Name(), Format: format, Size: info.Size(), Modified: info.ModTime().UTC()})
	}
	slices.SortFunc(out, func(a, b StateInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteState removes a state file. Deleting is always allowed, also over
// quota.
func (t *Tenant) DeleteState(name string) error {
	if _, err := ValidateStateName(name); err != nil {
		return err
	}
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.m.opts.SharedDataDir {
		// As writeState: not between another replica's compare and rename.
		unlock, err := t.lockState()
		if err != nil {
			return err
		}
		defer unlock()
	}
	p := path.Join(stateDir, name)
	st, err := t.ws.Lstat(p)
	if err == nil {
		err = t.ws.Remove(p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state %s: %w", name, pluginapi.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("tenant %s: delete state %s: %w", t.id, name, err)
	}
	switch t.m.opts.Sync {
	case SyncAlways:
		if err := syncDir(t.ws, stateDir); err != nil {
			return fmt.Errorf("tenant %s: delete state %s: %w", t.id, name, err)
		}
	case SyncBatched:
		t.pending.addState()
	}
	t.valid.forget(name)
	t.wrote(-st.Size())
	return nil
}

func (t *Tenant) checkStateSize(name string, n int64) error {
	if max := t.m.opts.MaxStateBytes; n > max {
		return fmt.Errorf("state %s is %s; the limit is %s: %w", name, bytesize.Format(n), bytesize.Format(max), ErrTooLarge)
	}
	return nil
}

func (t *Tenant) readState(name string) ([]byte, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	data, err := readRegular(t.ws, path.Join(stateDir, name), t.m.opts.MaxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("state %s: %w", name, pluginapi.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant %s: read state %s: %w", t.id, name, err)
	}
	return data, nil
}

// writeState stores data under name. A non-nil check vets data while it is
// written (see writeAtomic); when it fails, nothing was stored. A non-nil
// version makes the write conditional on the stored state's version
// (SaveStateIf).
func (t *Tenant) writeState(name, format string, data []byte, version *string, check func() error) (StateInfo, error) {
	if err := t.checkStateSize(name, int64(len(data))); err != nil {
		return StateInfo{}, err
	}
	if err := t.enter(); err != nil {
		return StateInfo{}, err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if version != nil || t.m.opts.SharedDataDir {
		// Replicas sharing the folder serialise every write, so an
		// unconditional save cannot land between another's compare and
		// rename.
		unlock, err := t.lockState()
		if err != nil {
			return StateInfo{}, err
		}
		defer unlock()
	}
	if version != nil {
		if err := t.checkVersion(name, *version); err != nil {
			return StateInfo{}, err
		}
	}
	w := atomicWrite{sync: t.m.opts.Sync.stateWrite(), own: t.owner, check: check}
	var old int64
	if st, err := t.ws.Lstat(path.Join(stateDir, name)); err == nil {
		old = st.Size()
		if st.Mode().IsRegular() {
			w.discard = t.discardState
		}
	}
	if err := t.reserve("state "+name, old, int64(len(data))); err != nil {
		return StateInfo{}, err
	}
	if err := writeAtomic(t.ws, stateDir, name, data, w); err != nil {
		if errors.Is(err, pluginapi.ErrInvalidArgument) {
			return StateInfo{}, err
		}
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return StateInfo{}, fmt.Errorf("tenant %s: save state %s: the disk is full, nothing was written: %w: %w", t.id, name, err, pluginapi.ErrResourceExhausted)
		}
		return StateInfo{}, fmt.Errorf("tenant %s: save state %s: %w", t.id, name, err)
	}
	if t.m.opts.Sync == SyncBatched {
		t.pending.addState()
	}
	if format == FormatJSON {
		t.valid.remember(name, bytes.TrimSpace(data))
	}
	t.wrote(int64(len(data)) - old)
	return StateInfo{Name: name, Format: format, Size: int64(len(data)), Modified: t.m.now().UTC(), Version: StateVersion(data)}, nil
}

// discardState removes the old content of a replaced state file, moved
// aside under a temporary name, in the background. A crash before that
// leaves a temporary file, removed when the tenant is next opened.
func (t *Tenant) discardState(name string) {
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		_ = t.ws.Remove(path.Join(stateDir, name))
	}()
}

// stateStamp identifies one version of a state file.
type stateStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// snapshotState records the state folder, to tell later which files an
// execution touched (sandboxed code writes them directly).
func (t *Tenant) snapshotState() map[string]stateStamp {
	out := map[string]stateStamp{}
	d, err := t.ws.Open(stateDir)
	if err != nil {
		return out
	}
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		s := stateStamp{size: info.Size(), mtime: info.ModTime()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			s.ino = st.Ino
		}
		out[e.Name()] = s
	}
	return out
}

// stateNames lists the state folder's files without a stat each.
func (t *Tenant) stateNames() []string {
	d, err := t.ws.Open(stateDir)
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// stateChanges lists files added, changed or removed between two snapshots.
func stateChanges(before, after map[string]stateStamp) []string {
	var out []string
	for name, s := range after {
		if b, ok := before[name]; !ok || b != s {
			out = append(out, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
