package workspace

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

func TestAttachments(t *testing.T) {
	m := newManager(t, Options{})
	ten, err := m.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := ten.SaveAttachment("s1", "../../etc/chart final.png", []byte("PNG"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rel, "attachments/s1/") || !strings.HasSuffix(rel, ".png") || strings.Contains(rel, "chart") {
		t.Errorf("path %q", rel)
	}
	if data, err := os.ReadFile(filepath.Join(ten.WorkspaceDir(), rel)); err != nil || string(data) != "PNG" {
		t.Errorf("on disk: %q, %v", data, err)
	}
	if data, err := ten.ReadAttachment(rel); err != nil || string(data) != "PNG" {
		t.Errorf("read back: %q, %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(ten.WorkspaceDir(), "state", "secret.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ten.WorkspaceDir(), "attachments", "s1", "link")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"state/secret.json", "attachments/s1/../../state/secret.json", "attachments/s1/link",
		"attachments/s1/missing", "/etc/passwd", "attachments/s1"} {
		if _, err := ten.ReadAttachment(bad); !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("ReadAttachment(%q) = %v, want not found", bad, err)
		}
	}
	// The attachments go with their session when it expires.
	if _, err := ten.Checkpoint("s1", "step", nil); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-31 * 24 * time.Hour)
	if err := os.Chtimes(filepath.Join(m.opts.DataDir, "tenants", "acme", "sessions", "s1"+logSuffix), then, then); err != nil {
		t.Fatal(err)
	}
	if n, err := m.ExpireSessions(t.Context()); n != 1 || err != nil {
		t.Fatalf("expired %d, %v", n, err)
	}
	if _, err := os.Lstat(filepath.Join(ten.WorkspaceDir(), "attachments", "s1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an expired session's attachments are still there: %v", err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("the symlink's target went with the attachments: %v", err)
	}
	if _, err := ten.SaveAttachment("../x", "a", nil); err == nil {
		t.Error("a bad session id was accepted")
	}
}

// TestAttachmentPathHidesName checks that a saved attachment's path, which
// the agent gets untokenized in its URI, keeps nothing of the name the
// program gave but a short extension: names carry PII as easily as texts.
func TestAttachmentPathHidesName(t *testing.T) {
	m := newManager(t, Options{})
	ten, err := m.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ext string
		secret    []string
	}{
		{"jane.doe@example.com.csv", ".csv", []string{"jane", "example"}},
		{"ssn 123-45-6789.txt", ".txt", []string{"123", "6789"}},
		{"AKIAIOSFODNN7EXAMPLE.txt", ".txt", []string{"AKIA"}},
		{"card.4111111111111111", "", []string{"4111"}},
		{"report.JSON", ".json", nil},
		{"...", "", nil},
		{"", "", nil},
		{"..\\..\\x.png", ".png", nil},
		{"a.b/c", "", nil},
		{"x.p-g", "", nil},
	}
	for _, tc := range tests {
		rel, err := ten.SaveAttachment("s1", tc.name, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		file := path.Base(rel)
		if path.Ext(file) != tc.ext || len(file) != 12+len(tc.ext) {
			t.Errorf("SaveAttachment(%q) = %q, want 12 hex digits and %q", tc.name, rel, tc.ext)
		}
		for _, s := range tc.secret {
			if strings.Contains(rel, s) {
				t.Errorf("SaveAttachment(%q) = %q, which keeps %q", tc.name, rel, s)
			}
		}
	}
}
