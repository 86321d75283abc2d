package hostchan

import (
	"os"
	"testing"

	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// TestNewRemovesDeadDaemonsDirs: a daemon that died before Close left its
// socket directory; the next daemon's New removes it, and leaves the
// directory of a daemon that is still running.
func TestNewRemovesDeadDaemonsDirs(t *testing.T) {
	// Not t.TempDir: its long path would make the socket path longer
	// than a unix socket address may be.
	parent, err := os.MkdirTemp("", "hc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	live, err := New(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := New(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Open("box", nil, runtime.Options{}); err != nil {
		t.Fatal(err)
	}
	// A crash: the process's descriptors close, nothing is removed.
	_ = dead.owner.Close()
	half := parent + "/" + dirPrefix + "being-made"
	if err := os.Mkdir(half, 0o700); err != nil {
		t.Fatal(err)
	}

	next, err := New(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for _, tc := range []struct {
		dir  string
		kept bool
	}{
		{live.Dir(), true},
		{dead.Dir(), false},
		{half, true},
		{next.Dir(), true},
	} {
		_, err := os.Stat(tc.dir)
		if kept := err == nil; kept != tc.kept {
			t.Errorf("%s: kept = %v, want %v (%v)", tc.dir, kept, tc.kept, err)
		}
	}
}
