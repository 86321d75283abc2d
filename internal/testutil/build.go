package testutil

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// ModuleRoot is the repository's root folder, found from this file's path so
// that it is right whichever package's test calls it.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// GoBuild builds pkg (an import path, or a path relative to the module root
// such as "./cmd/cexecd") into out with the go command on PATH.
func GoBuild(out, pkg string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("find go: %w", err)
	}
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	cmd.Dir = ModuleRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// BuildBinary builds pkg into a temporary folder of t and returns the
// binary's path; a build failure fails the test.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if err := GoBuild(out, pkg); err != nil {
		t.Fatal(err)
	}
	return out
}
