package childenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(filepath.Join(bin, "folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"srv": 0o755, "plain": 0o644} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name    string
		command string
		path    string
		dir     string
		want    string // the path found, or a substring of the error
		wantErr bool
	}{
		{"bare name in PATH", "srv", "/nonexistent:" + bin, "", filepath.Join(bin, "srv"), false},
		{"bare name not in PATH", "srv", "/nonexistent", "", `command "srv" not found in the server's PATH (/nonexistent)`, true},
		{"relative PATH entries skipped", "srv", "bin", dir, "not found", true},
		{"absolute path", filepath.Join(bin, "srv"), "", "", filepath.Join(bin, "srv"), false},
		{"absolute path missing", "/nonexistent/bin", "", "", "command /nonexistent/bin: stat /nonexistent/bin: no such file or directory", true},
		{"relative path against dir", "bin/srv", "", dir, filepath.Join(bin, "srv"), false},
		{"not executable", filepath.Join(bin, "plain"), "", "", "permission denied", true},
		{"directory", filepath.Join(bin, "folder"), "", "", "is a directory", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookPath(tt.command, []string{"PATH=" + tt.path}, tt.dir)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("LookPath = %q, %v; want an error with %q", got, err, tt.want)
			case !tt.wantErr && (err != nil || got != tt.want):
				t.Errorf("LookPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
