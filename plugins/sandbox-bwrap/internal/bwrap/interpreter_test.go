package bwrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/internal/testutil"
)

func TestInterpreterCopy(t *testing.T) {
	s, _ := New(nil).settings(t.Context())
	if s.python == "" {
		testutil.SkipMissing(t, "no usable python")
	}
	logs := &testutil.Buffer{}
	p := New(hclog.New(&hclog.LoggerOptions{Output: logs}))
	t.Cleanup(func() { _ = p.Close() })
	missing := filepath.Join(t.TempDir(), "python3")
	tests := []struct {
		name, python string
		ok           bool
	}{
		{name: "the interpreter", python: s.python, ok: true},
		{name: "the same again", python: s.python, ok: true},
		{name: "a missing one", python: missing},
	}
	var first string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := p.interpreter(t.Context(), tc.python)
			if !tc.ok {
				if path != "" || !strings.Contains(logs.String(), missing) {
					t.Errorf("copy %q, log %q", path, logs.String())
				}
				return
			}
			if first == "" {
				first = path
			} else if path != first {
				t.Errorf("copied again: %s, then %s", first, path)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o111 {
				t.Fatalf("copy %s: %v %v", path, fi, err)
			}
			// Read back as the owner would, were it not for the mode.
			if err := os.Chmod(path, 0o500); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			_ = os.Chmod(path, 0o111)
			want, _ := os.ReadFile(tc.python)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("copy differs from %s (%v)", tc.python, err)
			}
		})
	}
	dir := p.interpDir
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
}

// TestInterpreterOnNoexecTemp: where temporary files cannot be executed, no
// copy is used and sandboxes run the interpreter itself (their zygotes call
// prctl): a bind of the copy would keep the noexec and fail every sandbox.
func TestInterpreterOnNoexecTemp(t *testing.T) {
	s, _ := New(nil).settings(t.Context())
	if s.python == "" {
		testutil.SkipMissing(t, "no usable python")
	}
	tmp := t.TempDir()
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOEXEC, "size=64m"); err != nil {
		t.Skipf("cannot mount a noexec tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(tmp, unix.MNT_DETACH) })
	t.Setenv("TMPDIR", tmp)
	logs := &testutil.Buffer{}
	p := New(hclog.New(&hclog.LoggerOptions{Output: logs}))
	t.Cleanup(func() { _ = p.Close() })
	if path := p.interpreter(t.Context(), s.python); path != "" || !strings.Contains(logs.String(), "run the copy") {
		t.Errorf("copy %q, log %q", path, logs.String())
	}
}

// TestInterpreterCancelled: a request cancelled while the copy is made
// leaves no failure behind for the next one.
func TestInterpreterCancelled(t *testing.T) {
	s, _ := New(nil).settings(t.Context())
	if s.python == "" {
		testutil.SkipMissing(t, "no usable python")
	}
	p := New(nil)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if path := p.interpreter(ctx, s.python); path != "" {
		t.Errorf("copy %q made for a cancelled request", path)
	}
	if path := p.interpreter(t.Context(), s.python); path == "" {
		t.Error("no copy after a cancelled request")
	}
}
