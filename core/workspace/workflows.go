package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi"
)

// Workflow documents are stored like skills: a tenant's own in its
// workspace (workflows/<name>.yaml, which its programs may read and
// write), shared ones read-only in the repository's workflows/ folder
// (Options.SharedWorkflowsDir). A tenant's document of a shared one's name
// is refused, so a name always means one document.
const (
	workflowsDir = "workflows"
	// maxWorkflowSize bounds one document.
	maxWorkflowSize = 1 << 20
)

var workflowNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidateWorkflowName checks a stored workflow's name.
func ValidateWorkflowName(name string) error {
	if !workflowNameRE.MatchString(name) {
		return fmt.Errorf("invalid workflow name %q: use 1-64 characters of a-z, 0-9, _ and -, starting with a letter or digit: %w", clip(name), pluginapi.ErrInvalidArgument)
	}
	return nil
}

// StoredWorkflow is a workflow document kept by name.
type StoredWorkflow struct {
	Name   string
	Shared bool
	// File is its path on the host.
	File   string
	Source []byte
}

var workflowExts = []string{".yaml", ".yml", ".json"}

// ListWorkflows lists the tenant's workflows and the shared ones, by name;
// Source is not read.
func (t *Tenant) ListWorkflows() ([]StoredWorkflow, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.exit()
	out := t.m.SharedWorkflows()
	seen := map[string]bool{}
	for _, w := range out {
		seen[w.Name] = true
	}
	return appendWorkflows(out, seen, filepath.Join(t.WorkspaceDir(), workflowsDir), false), nil
}

// SharedWorkflows lists the shared workflows: those of a tenant that has
// stored none, without opening it.
func (m *Manager) SharedWorkflows() []StoredWorkflow {
	if d := m.opts.SharedWorkflowsDir; d != "" {
		return appendWorkflows(nil, map[string]bool{}, d, true)
	}
	return nil
}

// appendWorkflows adds the workflows of dir not in seen to out, by name.
func appendWorkflows(out []StoredWorkflow, seen map[string]bool, dir string, shared bool) []StoredWorkflow {
	names, _ := readDirNames(dir)
	slices.Sort(names)
	for _, n := range names {
		ext := filepath.Ext(n)
		name := strings.TrimSuffix(n, ext)
		if !slices.Contains(workflowExts, ext) || ValidateWorkflowName(name) != nil || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, StoredWorkflow{Name: name, Shared: shared, File: filepath.Join(dir, n)})
	}
	return out
}

// GetWorkflow reads a workflow by name: the shared one, else the tenant's.
func (t *Tenant) GetWorkflow(name string) (StoredWorkflow, error) {
	if err := ValidateWorkflowName(name); err != nil {
		return StoredWorkflow{}, err
	}
	if err := t.enter(); err != nil {
		return StoredWorkflow{}, err
	}
	defer t.exit()
	if d := t.m.opts.SharedWorkflowsDir; d != "" {
		if r, err := os.OpenRoot(d); err == nil {
			w, err := readWorkflow(r, ".", name, d)
			r.Close()
			if err == nil {
				w.Shared = true
				return w, nil
			}
		}
	}
	w, err := readWorkflow(t.ws, workflowsDir, name, filepath.Join(t.WorkspaceDir(), workflowsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return StoredWorkflow{}, fmt.Errorf("tenant %s has no workflow %s (cexecctl workflow ls lists them): %w", t.id, name, pluginapi.ErrNotFound)
	}
	return w, err
}

func readWorkflow(root *os.Root, dir, name, hostDir string) (StoredWorkflow, error) {
	for _, ext := range workflowExts {
		data, err := readRegular(root, dir+"/"+name+ext, maxWorkflowSize)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return StoredWorkflow{}, err
		}
		return StoredWorkflow{Name: name, File: filepath.Join(hostDir, name+ext), Source: data}, nil
	}
	return StoredWorkflow{}, fs.ErrNotExist
}

// SaveWorkflow stores a tenant's workflow document (checked by the caller)
// as workflows/<name>.yaml, atomically and within the disk quota.
func (t *Tenant) SaveWorkflow(name string, src []byte) (StoredWorkflow, error) {
	if err := ValidateWorkflowName(name); err != nil {
		return StoredWorkflow{}, err
	}
	if len(src) > maxWorkflowSize {
		return StoredWorkflow{}, fmt.Errorf("workflow %s is %s; the limit is %s: %w", name, bytesize.Format(int64(len(src))), bytesize.Format(maxWorkflowSize), ErrTooLarge)
	}
	if d := t.m.opts.SharedWorkflowsDir; d != "" {
		for _, ext := range workflowExts {
			if _, err := os.Lstat(filepath.Join(d, name+ext)); err == nil {
				return StoredWorkflow{}, fmt.Errorf("workflow %s: a shared workflow has that name; shared workflows are read-only, so pick another name: %w", name, pluginapi.ErrInvalidArgument)
			}
		}
	}
	if err := t.enter(); err != nil {
		return StoredWorkflow{}, err
	}
	defer t.exit()
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err := mkdirs(t.ws, t.owner, workflowsDir); err != nil {
		return StoredWorkflow{}, fmt.Errorf("tenant %s: create %s: %w", t.id, workflowsDir, err)
	}
	target := workflowsDir + "/" + name + ".yaml"
	var old int64
	if st, err := t.ws.Lstat(target); err == nil {
		old = st.Size()
	}
	if err := t.reserve("workflow "+name, old, int64(len(src))); err != nil {
		return StoredWorkflow{}, err
	}
	if err := writeAtomic(t.ws, workflowsDir, name+".yaml", src, atomicWrite{sync: t.m.opts.Sync.stateWrite(), own: t.owner}); err != nil {
		return StoredWorkflow{}, fmt.Errorf("tenant %s: save workflow %s: %w", t.id, name, err)
	}
	t.wrote(int64(len(src)) - old)
	return StoredWorkflow{Name: name, File: filepath.Join(t.WorkspaceDir(), target), Source: src}, nil
}
