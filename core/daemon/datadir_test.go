package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
)

// TestLockDataDir: a daemon alone excludes every other; replicas (a
// shared store) exclude a daemon alone but not each other.
func TestLockDataDir(t *testing.T) {
	tests := []struct {
		name          string
		first, second bool // shared
		wantErr       string
	}{
		{"alone, then alone", false, false, fmt.Sprintf("is in use by another cexecd (pid %d, socket /a.sock)", os.Getpid())},
		{"alone, then a replica", false, true, "in use by a cexecd without a shared store (pid"},
		{"a replica, then alone", true, false, "is in use by another cexecd;"},
		{"replicas", true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := lockDataDir(dir, "/a.sock", tt.first)
			if err != nil {
				t.Fatal(err)
			}
			second, err := lockDataDir(dir, "/b.sock", tt.second)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("second lock: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrAlreadyRunning)):
				t.Fatalf("second lock = %v, want ErrAlreadyRunning saying %q", err, tt.wantErr)
			case err == nil:
				second.release()
			}
			first.release()
			// Released, the data_dir is anyone's.
			again, err := lockDataDir(dir, "/c.sock", false)
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			again.release()
		})
	}
}

// TestRunRefusesBusyDataDir: a second daemon on another socket but the
// same data_dir does not start.
func TestRunRefusesBusyDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	data := filepath.Join(dir, "data")
	first := filepath.Join(dir, "a.sock")
	d := start(t, Options{Overrides: config.Overrides{Socket: first, DataDir: data}})
	d.ready(t, first)
	err := Run(t.Context(), Options{Stderr: &testutil.Buffer{},
		Overrides: config.Overrides{Socket: filepath.Join(dir, "b.sock"), DataDir: data}})
	if !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), "socket "+first) {
		t.Fatalf("second Run = %v, want a refusal naming the first daemon", err)
	}
}
