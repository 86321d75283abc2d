package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

func TestRunJournal(t *testing.T) {
	m := newManager(t, Options{})
	if err := m.CreateRun("acme", "r1", []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateRun("acme", "r1", []byte(`{"seq":1}`)); err == nil {
		t.Error("a second CreateRun of one run must fail")
	}
	if err := m.AppendRun("acme", "r1", []byte(`{"seq":2}`), true); err != nil {
		t.Fatal(err)
	}
	// A crash mid-append leaves a torn last line: readers skip it and the
	// next append cuts it off.
	file := filepath.Join(mustTenant(t, m, "acme").dir, runsDir, "r1"+runsSuffix)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":3,"torn`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	recs, err := m.ReadRun("acme", "r1")
	if err != nil || len(recs) != 2 {
		t.Fatalf("read with a torn line: %q %v", recs, err)
	}
	if err := m.AppendRun("acme", "r1", []byte(`{"seq":3}`), false); err != nil {
		t.Fatal(err)
	}
	recs, _ = m.ReadRun("acme", "r1")
	var got []string
	for _, r := range recs {
		got = append(got, string(r))
	}
	if strings.Join(got, ",") != `{"seq":1},{"seq":2},{"seq":3}` {
		t.Errorf("records %v", got)
	}
	if err := m.AppendRun("acme", "r2", []byte(`{}`), true); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("append to a run never created: %v", err)
	}
	if err := m.AppendRun("acme", "r1", []byte("{}\n{}"), true); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("a record of two lines: %v", err)
	}
	if err := m.CreateRun("acme", "../x", []byte(`{}`)); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("a run id with a path: %v", err)
	}
	if _, err := m.ReadRun("acme", "../x"); err == nil || !strings.HasPrefix(err.Error(), `invalid run id "../x"`) {
		t.Errorf("a run id with a path must be refused as a run id: %v", err)
	}
	if _, err := m.ReadRun("other", "r1"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("another tenant's run: %v", err)
	}
	if ids, err := m.ListRuns("acme"); err != nil || !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("ListRuns: %v %v", ids, err)
	}
	if ts, err := m.RunTenants(); err != nil || !slices.Equal(ts, []string{"acme"}) {
		t.Errorf("RunTenants: %v %v", ts, err)
	}
}

func TestRunJournalQuota(t *testing.T) {
	m := newManager(t, Options{DefaultQuota: Quota{DiskBytes: 4096}})
	if err := m.CreateRun("acme", "r1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	tn := mustTenant(t, m, "acme")
	writeFile(t, filepath.Join(tn.WorkspaceDir(), "big"), make([]byte, 8192))
	if _, err := tn.CheckQuota(); err == nil {
		t.Fatal("the tenant should be over its quota")
	}
	if err := m.AppendRun("acme", "r1", []byte(`{}`), true); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("append over quota: %v", err)
	}
}

func TestStoredWorkflows(t *testing.T) {
	shared := t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "common.yaml"), []byte("document: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Options{SharedWorkflowsDir: shared})
	tn := mustTenant(t, m, "acme")
	if _, err := tn.SaveWorkflow("common", []byte("x")); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("saving over a shared name: %v", err)
	}
	if _, err := tn.SaveWorkflow("Bad Name", []byte("x")); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := tn.SaveWorkflow("mine", []byte("document: {}\n")); err != nil {
		t.Fatal(err)
	}
	ws, err := tn.ListWorkflows()
	if err != nil || len(ws) != 2 || ws[0].Name != "common" || !ws[0].Shared || ws[1].Name != "mine" || ws[1].Shared {
		t.Fatalf("ListWorkflows: %+v %v", ws, err)
	}
	w, err := tn.GetWorkflow("mine")
	if err != nil || string(w.Source) != "document: {}\n" {
		t.Errorf("GetWorkflow: %+v %v", w, err)
	}
	if _, err := tn.GetWorkflow("none"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("GetWorkflow of a missing one: %v", err)
	}
	if _, err := mustTenant(t, m, "other").GetWorkflow("mine"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("another tenant's workflow: %v", err)
	}
}
