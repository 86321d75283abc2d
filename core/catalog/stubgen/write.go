package stubgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// WriteReport says what Write changed. Paths are slash-separated and relative to the root.
type WriteReport struct {
	Written   []string // files created or changed
	Unchanged int      // files that already had the right content
	Removed   []string // generated files of tools or servers no longer in the tree
	// Skipped are paths left alone because they are hand-written: a package directory
	// servers/<name> whose __init__.py lacks the generated marker (that server's stubs are
	// not installed; rename the server or the directory), or a hand-written file where a
	// stub module would go.
	Skipped []string
}

// Write installs pkgs under root (root/servers/<package>/...), making the generated part of
// the tree equal to pkgs: changed files are replaced one by one through a temporary file and
// a rename, so a reader sees either the old or the new content of a file; unchanged files
// are not touched; generated files of removed tools and of servers not in pkgs are deleted.
// Files and directories without the generated marker are never modified or deleted.
// servers/ itself stays a namespace package (no __init__.py). Callers serialise Writes to
// one root.
func Write(root string, pkgs []Package) (WriteReport, error) {
	var rep WriteReport
	serversDir := filepath.Join(root, "servers")
	if err := os.MkdirAll(serversDir, 0o755); err != nil {
		return rep, fmt.Errorf("create stub tree: %w", err)
	}
	want := map[string]bool{}
	for _, p := range pkgs {
		want[p.Name] = true
		if err := writePackage(root, p, &rep); err != nil {
			return rep, err
		}
	}
	entries, err := os.ReadDir(serversDir)
	if err != nil {
		return rep, fmt.Errorf("read stub tree: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || want[e.Name()] {
			continue
		}
		dir := filepath.Join(serversDir, e.Name())
		if !isGenerated(filepath.Join(dir, "__init__.py")) {
			continue // hand-written local tools, or not a package at all
		}
		if err := removeStale(root, "servers/"+e.Name(), nil, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func writePackage(root string, p Package, rep *WriteReport) error {
	rel := "servers/" + p.Name
	dir := filepath.Join(root, filepath.FromSlash(rel))
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("stat stub package %s: %w", rel, err)
	case !fi.IsDir() || !isGenerated(filepath.Join(dir, "__init__.py")) && !isEmptyDir(dir):
		rep.Skipped = append(rep.Skipped, rel)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create stub package %s: %w", rel, err)
	}
	// Tool modules before __init__.py, so a name the new __init__ offers is importable the
	// moment it appears; stale modules go last, after __init__ stopped offering them.
	initPath := rel + "/__init__.py"
	paths := make([]string, 0, len(p.Files))
	for f := range p.Files {
		if f != initPath {
			paths = append(paths, f)
		}
	}
	slices.Sort(paths)
	if _, ok := p.Files[initPath]; ok {
		paths = append(paths, initPath)
	}
	for _, f := range paths {
		if err := writeFile(root, f, p.Files[f], rep); err != nil {
			return err
		}
	}
	return removeStale(root, rel, p.Files, rep)
}

// writeFile replaces one generated file unless it already has the content or is hand-written.
func writeFile(root, rel string, content []byte, rep *WriteReport) error {
	dst := filepath.Join(root, filepath.FromSlash(rel))
	old, err := os.ReadFile(dst)
	switch {
	case err == nil && bytes.Equal(old, content):
		rep.Unchanged++
		return nil
	case err == nil && !hasMarker(old):
		rep.Skipped = append(rep.Skipped, rel)
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read stub %s: %w", rel, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return fmt.Errorf("write stub %s: %w", rel, err)
	}
	_, err = tmp.Write(content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write stub %s: %w", rel, err)
	}
	rep.Written = append(rep.Written, rel)
	return nil
}

// removeStale deletes the generated .py files in the package directory rel that keep does not
// list, then the directory itself when nothing but Python's cache is left in it.
func removeStale(root, rel string, keep map[string][]byte, rep *WriteReport) error {
	dir := filepath.Join(root, filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read stub package %s: %w", rel, err)
	}
	var stale []string
	for _, e := range entries {
		f := path.Join(rel, e.Name())
		if _, ok := keep[f]; ok || !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".py") {
			continue
		}
		if isGenerated(filepath.Join(dir, e.Name())) {
			stale = append(stale, f)
		}
	}
	// __init__.py last: while it exists the directory still counts as generated.
	slices.SortFunc(stale, func(a, b string) int {
		return boolInt(path.Base(a) == "__init__.py") - boolInt(path.Base(b) == "__init__.py")
	})
	for _, f := range stale {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(f))); err != nil {
			return fmt.Errorf("remove stale stub %s: %w", f, err)
		}
		rep.Removed = append(rep.Removed, f)
	}
	if keep != nil {
		return nil
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read stub package %s: %w", rel, err)
	}
	for _, e := range left {
		if e.Name() != "__pycache__" {
			return nil // hand-written files stay, and so does their directory
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "__pycache__")); err != nil {
		return fmt.Errorf("remove stale stub package %s: %w", rel, err)
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("remove stale stub package %s: %w", rel, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// IsGeneratedPackage reports whether dir is a package the generator wrote (its
// __init__.py carries the marker), not hand-written local tools.
func IsGeneratedPackage(dir string) bool {
	return isGenerated(filepath.Join(dir, "__init__.py"))
}

// isGenerated reports whether the file at p starts with the generated marker.
func isGenerated(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(Marker)+2)
	n, _ := io.ReadFull(f, head)
	return hasMarker(head[:n])
}

func hasMarker(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte(Marker))
	return ok && (len(rest) == 0 || rest[0] == '\n' || rest[0] == '\r')
}

func isEmptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}
