package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestStateFilesWatched checks what an execution reports as its state
// changes when they come from inotify: only changes made after Begin, and
// the whole folder when the folder itself was replaced meanwhile, as
// sandboxed code may do.
func TestStateFilesWatched(t *testing.T) {
	tests := []struct {
		name   string
		before func(state string) // runs before Begin
		during func(state string) // runs while the execution runs
		want   []string
	}{
		{"changes before Begin are not this execution's",
			func(s string) { writeFile(t, filepath.Join(s, "old.json"), []byte(`1`)) },
			func(s string) { writeFile(t, filepath.Join(s, "new.json"), []byte(`2`)) },
			[]string{"new.json"}},
		{"an overwrite in place, a rename and a removal",
			func(s string) {
				for _, n := range []string{"a.json", "b.json", "c.json", "keep.json"} {
					writeFile(t, filepath.Join(s, n), []byte(`1`))
				}
			},
			func(s string) {
				writeFile(t, filepath.Join(s, "a.json"), []byte(`2`))
				must(t, os.Rename(filepath.Join(s, "b.json"), filepath.Join(s, "b2.json")))
				must(t, os.Remove(filepath.Join(s, "c.json")))
			},
			[]string{"a.json", "b.json", "b2.json", "c.json"}},
		{"the folder replaced: every file it holds",
			func(s string) { writeFile(t, filepath.Join(s, "x.json"), []byte(`1`)) },
			func(s string) {
				must(t, os.RemoveAll(s))
				must(t, os.Mkdir(s, 0o755))
				writeFile(t, filepath.Join(s, "y.json"), []byte(`1`))
				writeFile(t, filepath.Join(s, "z.json"), []byte(`1`))
			},
			[]string{"y.json", "z.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, Options{DataDir: t.TempDir()})
			if m.states == nil {
				t.Fatal("no inotify watcher")
			}
			tn := mustTenant(t, m, "acme")
			state := filepath.Join(tn.WorkspaceDir(), "state")
			tt.before(state)
			x, err := tn.Begin("s1")
			if err != nil {
				t.Fatal(err)
			}
			tt.during(state)
			e, err := x.Finish(Entry{Code: "work()", Result: &Result{OK: true}})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.StateFiles, tt.want) {
				t.Errorf("StateFiles = %v, want %v", e.StateFiles, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
