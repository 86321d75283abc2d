package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cexec/cexec/pluginapi"
)

// Workflow run journals (core/workflow) live beside the sessions, outside
// the workspace, so sandboxed code can neither read nor forge them:
//
//	<tenant>/runs/<run>.jsonl   one record a line, append-only, 0600
//
// An append the engine asks to sync (a finished task, a signal) is fsynced
// before it returns whatever the sync policy: a resumed run trusts the
// journal to hold every task it reported done.
// Appends are refused when the tenant is over its disk quota, so runs are
// held to it like everything else the tenant stores.
const (
	runsDir    = "runs"
	runsSuffix = ".jsonl"
)

// CreateRun creates a run's journal with its first record.
func (m *Manager) CreateRun(tenant, run string, first []byte) error {
	return m.appendRun(tenant, run, first, true, true)
}

// AppendRun appends one record (a line of JSON) to a run's journal; with
// sync it is on the disk (fsynced) when AppendRun returns, else it is in
// the page cache (it survives a kill -9 of cexecd, not a power cut).
func (m *Manager) AppendRun(tenant, run string, record []byte, sync bool) error {
	return m.appendRun(tenant, run, record, false, sync)
}

func (m *Manager) appendRun(tenant, run string, record []byte, create, sync bool) error {
	if err := validateRunID(run); err != nil {
		return err
	}
	if bytes.ContainsRune(record, '\n') {
		return fmt.Errorf("run %s: a journal record must be one line: %w", run, pluginapi.ErrInvalidArgument)
	}
	t, err := m.Tenant(tenant)
	if err != nil {
		return err
	}
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	if err := t.overQuota(); err != nil {
		return fmt.Errorf("run %s: nothing was journaled: %w", run, err)
	}
	mu := t.sessionLock("run:" + run)
	mu.Lock()
	defer mu.Unlock()
	if err := mkdirs(t.root, nil, runsDir); err != nil {
		return fmt.Errorf("tenant %s: create %s: %w", t.id, runsDir, err)
	}
	name := runsDir + "/" + run + runsSuffix
	flags := os.O_RDWR | os.O_APPEND
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := t.root.OpenFile(name, flags, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("tenant %s: run %s: %w", t.id, run, pluginapi.ErrNotFound)
		}
		return fmt.Errorf("tenant %s: open run journal %s: %w", t.id, run, err)
	}
	defer f.Close()
	if !create {
		if err := cutTornLine(f); err != nil {
			return fmt.Errorf("tenant %s: repair run journal %s: %w", t.id, run, err)
		}
	}
	line := append(append(make([]byte, 0, len(record)+1), record...), '\n')
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("tenant %s: append to run journal %s: %w", t.id, run, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("tenant %s: sync run journal %s: %w", t.id, run, err)
		}
	}
	if create {
		if err := syncDir(t.root, runsDir); err != nil {
			return fmt.Errorf("tenant %s: sync %s: %w", t.id, runsDir, err)
		}
	}
	t.wmu.Lock()
	t.wrote(int64(len(line)))
	t.wmu.Unlock()
	return nil
}

// cutTornLine removes a last line without its newline: a crash mid-append
// left it, it was never acknowledged, and the next line must not be glued
// to it.
func cutTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return f.Truncate(int64(bytes.LastIndexByte(data, '\n') + 1))
}

// HoldRun takes a run for this process, for the workflow engine that
// executes it (workflow.RunHolder): with a data_dir shared by replicas it
// is a flock(2) on the run's journal, which another replica's HoldRun
// finds taken (elsewhere) and a killed process drops at once. Without
// sharing, one process has the journals and holds nothing.
func (m *Manager) HoldRun(tenant, run string) (release func(), elsewhere bool, err error) {
	if !m.opts.SharedDataDir {
		return func() {}, false, nil
	}
	if err := validateRunID(run); err != nil {
		return nil, false, err
	}
	t, err := m.Tenant(tenant)
	if err != nil {
		return nil, false, err
	}
	if err := t.enter(); err != nil {
		return nil, false, err
	}
	defer t.exit()
	f, err := t.root.OpenFile(runsDir+"/"+run+runsSuffix, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("tenant %s has no workflow run %s: %w", t.id, run, pluginapi.ErrNotFound)
	}
	if err != nil {
		return nil, false, fmt.Errorf("tenant %s: hold run %s: %w", t.id, run, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("tenant %s: hold run %s: %w", t.id, run, err)
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, false, nil
}

// ReadRun returns a run's journal records in order, without a torn last
// line.
func (m *Manager) ReadRun(tenant, run string) ([][]byte, error) {
	if err := validateRunID(run); err != nil {
		return nil, err
	}
	t, err := m.Tenant(tenant)
	if err != nil {
		return nil, err
	}
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	data, err := t.root.ReadFile(runsDir + "/" + run + runsSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tenant %s has no workflow run %s: %w", t.id, run, pluginapi.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant %s: read run journal %s: %w", t.id, run, err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out [][]byte
	for l := range bytes.Lines(data) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// ListRuns lists a tenant's runs, oldest first (run ids start with their
// time).
func (m *Manager) ListRuns(tenant string) ([]string, error) {
	t, err := m.Tenant(tenant)
	if err != nil {
		return nil, err
	}
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	names, err := readDirNames(t.dir + "/" + runsDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("tenant %s: list runs: %w", t.id, err)
	}
	var out []string
	for _, n := range names {
		if id, ok := strings.CutSuffix(n, runsSuffix); ok && validateRunID(id) == nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RunTenants lists the tenants with workflow runs. A tenant whose image is
// not mounted yet is opened (mounted) to look.
func (m *Manager) RunTenants() ([]string, error) {
	names, err := readDirNames(m.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, id := range names {
		if ValidateTenantID(id) != nil {
			continue
		}
		dir := m.dir + "/" + id
		if m.images {
			t, err := m.Tenant(id)
			if err != nil {
				m.log.Warn("open tenant to look for workflow runs", "tenant", id, "error", err)
				continue
			}
			dir = t.dir
		}
		if _, err := os.Stat(dir + "/" + runsDir); err == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// validateRunID checks a run id by the rule of session ids (a run's calls
// are logged in session wf-<run>), naming it as what the caller gave.
func validateRunID(run string) error {
	if ValidateSessionID(run) != nil {
		return fmt.Errorf("invalid run id %q: use 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit: %w",
			clip(run), pluginapi.ErrInvalidArgument)
	}
	return nil
}
