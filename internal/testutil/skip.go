package testutil

import (
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true, as .ci/run is
// started).
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipMissing skips t because something it needs is not installed (bubblewrap,
// node, the npm test peers, mypy, a plugin binary). Under CI it fails t
// instead: there every dependency is installed by make deps, so a missing one
// is a broken install step that silent skips would hide.
func SkipMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("missing dependency under CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}
