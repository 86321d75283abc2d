package workspace

import (
	"errors"
	"os"
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
	if !strings.HasPrefix(rel, "attachments/s1/") || !strings.HasSuffix(rel, "-chart_final.png") {
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
	for name, want := range map[string]string{"": "attachment", "...": "attachment", ".hidden": "hidden",
		strings.Repeat("a", 200) + ".png": strings.Repeat("a", 76) + ".png"} {
		if got := attachmentName(name); got != want {
			t.Errorf("attachmentName(%q) = %q, want %q", name, got, want)
		}
	}
}
