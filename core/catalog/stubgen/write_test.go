package stubgen

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func tools(names ...string) []Tool {
	var ts []Tool
	for _, n := range names {
		ts = append(ts, Tool{Name: n, Description: "Tool " + n + "."})
	}
	return ts
}

func mustWrite(t *testing.T, root string, servers ...Server) WriteReport {
	t.Helper()
	rep, err := Write(root, Generate(servers))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Written)
	slices.Sort(rep.Removed)
	slices.Sort(rep.Skipped)
	return rep
}

func writeRaw(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readRaw(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(root, rel string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}

func TestWriteFreshAndUnchanged(t *testing.T) {
	root := t.TempDir()
	srv := Server{Name: "fs", Tools: tools("read", "write")}
	rep := mustWrite(t, root, srv)
	want := []string{"servers/fs/__init__.py", "servers/fs/read.py", "servers/fs/write.py"}
	if !slices.Equal(rep.Written, want) || rep.Unchanged != 0 || len(rep.Removed)+len(rep.Skipped) != 0 {
		t.Errorf("first write: %+v, want written %v", rep, want)
	}
	if exists(root, "servers/__init__.py") {
		t.Error("servers/ must stay a namespace package")
	}
	fi, err := os.Stat(filepath.Join(root, "servers", "fs", "read.py"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("read.py: %v %v, want mode 0644", fi, err)
	}
	before := fi.ModTime()
	rep = mustWrite(t, root, srv)
	if len(rep.Written) != 0 || rep.Unchanged != 3 {
		t.Errorf("second write: %+v, want 3 unchanged", rep)
	}
	if fi, _ := os.Stat(filepath.Join(root, "servers", "fs", "read.py")); !fi.ModTime().Equal(before) {
		t.Error("an unchanged file was rewritten")
	}
	matches, _ := filepath.Glob(filepath.Join(root, "servers", "fs", ".*"))
	if len(matches) != 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}
}

func TestWriteRemovesStaleTools(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, root, Server{Name: "fs", Tools: tools("read", "write", "delete")})
	writeRaw(t, root, "servers/fs/helper.py", "# hand-written helper next to the stubs\n")
	rep := mustWrite(t, root, Server{Name: "fs", Tools: tools("read", "write", "stat")})
	if want := []string{"servers/fs/__init__.py", "servers/fs/stat.py"}; !slices.Equal(rep.Written, want) {
		t.Errorf("written %v, want %v", rep.Written, want)
	}
	if want := []string{"servers/fs/delete.py"}; !slices.Equal(rep.Removed, want) {
		t.Errorf("removed %v, want %v", rep.Removed, want)
	}
	if exists(root, "servers/fs/delete.py") || !exists(root, "servers/fs/helper.py") {
		t.Error("want delete.py gone and helper.py kept")
	}
}

func TestWriteLeavesHandWrittenPackages(t *testing.T) {
	root := t.TempDir()
	local := "\"\"\"Local weather tools.\"\"\"\n"
	writeRaw(t, root, "servers/weather/__init__.py", local)
	writeRaw(t, root, "servers/weather/forecast.py", "def forecast() -> str:\n    return 'sun'\n")
	writeRaw(t, root, "servers/notes/notes.py", "# a namespace package of local tools\n")
	rep := mustWrite(t, root,
		Server{Name: "weather", Tools: tools("forecast")},
		Server{Name: "notes", Tools: tools("add")},
		Server{Name: "fs", Tools: tools("read")})
	if want := []string{"servers/notes", "servers/weather"}; !slices.Equal(rep.Skipped, want) {
		t.Errorf("skipped %v, want %v", rep.Skipped, want)
	}
	if got := readRaw(t, root, "servers/weather/__init__.py"); got != local {
		t.Errorf("hand-written __init__.py changed to %q", got)
	}
	if exists(root, "servers/notes/add.py") || !exists(root, "servers/fs/read.py") {
		t.Error("want no stubs in hand-written packages and stubs for fs")
	}
	// Removing every server must not touch the hand-written packages either.
	rep = mustWrite(t, root)
	if !exists(root, "servers/weather/forecast.py") || !exists(root, "servers/notes/notes.py") {
		t.Error("hand-written packages were removed")
	}
	if exists(root, "servers/fs") {
		t.Error("the generated package of a removed server is still there")
	}
	if want := []string{"servers/fs/__init__.py", "servers/fs/read.py"}; !slices.Equal(rep.Removed, want) {
		t.Errorf("removed %v, want %v", rep.Removed, want)
	}
}

func TestWriteLeavesHandWrittenFileInGeneratedPackage(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, root, Server{Name: "fs", Tools: tools("read")})
	writeRaw(t, root, "servers/fs/stat.py", "# mine\n")
	rep := mustWrite(t, root, Server{Name: "fs", Tools: tools("read", "stat")})
	if want := []string{"servers/fs/stat.py"}; !slices.Equal(rep.Skipped, want) {
		t.Errorf("skipped %v, want %v", rep.Skipped, want)
	}
	if got := readRaw(t, root, "servers/fs/stat.py"); got != "# mine\n" {
		t.Errorf("hand-written stat.py changed to %q", got)
	}
}

func TestWriteRemovesStalePackage(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, root, Server{Name: "old", Tools: tools("a")}, Server{Name: "keep", Tools: tools("b")})
	writeRaw(t, root, "servers/old/__pycache__/a.cpython-311.pyc", "bytecode")
	mustWrite(t, root, Server{Name: "keep", Tools: tools("b")})
	if exists(root, "servers/old") {
		t.Error("stale generated package (with its __pycache__) not removed")
	}
	// A stale package with a hand-written file keeps that file and its directory.
	mustWrite(t, root, Server{Name: "old", Tools: tools("a")})
	writeRaw(t, root, "servers/old/notes.txt", "mine")
	mustWrite(t, root)
	if !exists(root, "servers/old/notes.txt") || exists(root, "servers/old/__init__.py") {
		t.Error("want notes.txt kept and the generated files gone")
	}
}

func TestWriteClaimsEmptyDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "servers", "fs"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep := mustWrite(t, root, Server{Name: "fs", Tools: tools("read")})
	if len(rep.Skipped) != 0 || !exists(root, "servers/fs/read.py") {
		t.Errorf("empty directory not used: %+v", rep)
	}
}

func TestHasMarker(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{Marker + "\n\nimport x\n", true},
		{Marker + "\r\n", true},
		{Marker, true},
		{Marker + " extra\n", false},
		{"\n" + Marker + "\n", false},
		{"# Code generated by someone else; DO NOT EDIT.\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := hasMarker([]byte(tt.in)); got != tt.want {
			t.Errorf("hasMarker(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
