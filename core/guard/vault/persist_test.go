package vault_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/guard/vault"
)

func TestPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	det := piiDetector{}

	s1 := newStore(t, dir, nil)
	v1, err := s1.Open("acme", "s1", det)
	if err != nil {
		t.Fatal(err)
	}
	if got := tokenize(t, v1, "alice@example.com, [EMAIL_3], bob@example.org"); got != "[EMAIL_1], [EMAIL_3], [EMAIL_2]" {
		t.Fatalf("Tokenize = %q", got)
	}
	if err := v1.Close(); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, "tenants", "acme", "vaults", "s1.json")
	if s1.Path("acme", "s1") != path {
		t.Errorf("Path = %s, want %s", s1.Path("acme", "s1"), path)
	}
	checkMode(t, path, 0o600)
	checkMode(t, filepath.Dir(path), 0o700)
	var f struct {
		Version  int
		Entries  []map[string]any
		Reserved []string
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &f); err != nil || f.Version != 1 || len(f.Entries) != 2 || len(f.Reserved) != 1 {
		t.Errorf("vault file %s: %+v, %v", data, f, err)
	}

	// A new store is a restarted daemon: it reloads the file.
	s2 := newStore(t, dir, nil)
	v2 := open(t, s2, "acme", "s1", det)
	if got := untokenize(t, v2, "[EMAIL_1] [EMAIL_2] [EMAIL_3]"); got != "alice@example.com bob@example.org [EMAIL_3]" {
		t.Errorf("Untokenize after restart = %q", got)
	}
	if got := tokenize(t, v2, "carol@example.net ALICE@example.com"); got != "[EMAIL_4] [EMAIL_1]" {
		t.Errorf("Tokenize after restart = %q (known values keep their token; the reserved number stays skipped)", got)
	}
	// Handles opened together share one state.
	v3 := open(t, s2, "acme", "s1", nil)
	if got := untokenize(t, v3, "[EMAIL_4]"); got != "carol@example.net" {
		t.Errorf("second handle sees %q", got)
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

func TestFolderModeIsTightened(t *testing.T) {
	dir := t.TempDir()
	vaults := filepath.Join(dir, "tenants", "acme", "vaults")
	if err := os.MkdirAll(vaults, 0o755); err != nil {
		t.Fatal(err)
	}
	open(t, newStore(t, dir, nil), "acme", "s1", nil)
	checkMode(t, vaults, 0o700)
}

func TestCorruptVault(t *testing.T) {
	const value = "alice@example.com"
	tests := []struct{ name, content, wantErr string }{
		{"not JSON", `{"version":1,"entries":[{"type":"EMAIL","n":1,"value":"` + value + `"}`, "corrupt"},
		{"wrong version", `{"version":7,"entries":[]}`, "version 7"},
		{"bad type", `{"version":1,"entries":[{"type":"e-mail","n":1,"value":"` + value + `"}]}`, "entry 0"},
		{"zero number", `{"version":1,"entries":[{"type":"EMAIL","n":0,"value":"` + value + `"}]}`, "entry 0"},
		{"duplicate token", `{"version":1,"entries":[{"type":"EMAIL","n":1,"value":"a"},{"type":"EMAIL","n":1,"value":"` + value + `"}]}`, "entry 1 repeats"},
		{"bad reservation", `{"version":1,"entries":[],"reserved":["` + value + `"]}`, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir, nil)
			if err := os.MkdirAll(filepath.Dir(s.Path("acme", "s1")), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.Path("acme", "s1"), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Open("acme", "s1", nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open = %v, want an error about %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), value) {
				t.Errorf("error quotes the vault: %v", err)
			}
		})
	}
}

func TestStaleTemporaryFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, nil)
	vaults := filepath.Dir(s.Path("acme", "s1"))
	if err := os.MkdirAll(vaults, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(vaults, ".s1.json.tmp-123")
	other := filepath.Join(vaults, ".s2.json.tmp-123")
	for _, f := range []string{stale, other} {
		if err := os.WriteFile(f, []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	open(t, s, "acme", "s1", nil)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file of s1 still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another session's temporary file was touched: %v", err)
	}
}

func TestDelete(t *testing.T) {
	s := newStore(t, t.TempDir(), nil)
	v, err := s.Open("acme", "s1", piiDetector{})
	if err != nil {
		t.Fatal(err)
	}
	tokenize(t, v, "alice@example.com")
	if err := s.Delete("acme", "s1"); !errors.Is(err, vault.ErrInUse) {
		t.Errorf("Delete of an open vault = %v, want ErrInUse", err)
	}
	_ = v.Close()
	if err := s.Delete("acme", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path("acme", "s1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("vault file after Delete: %v", err)
	}
	if err := s.Delete("acme", "s1"); err != nil {
		t.Errorf("Delete of a missing vault = %v", err)
	}
	if got := untokenize(t, open(t, s, "acme", "s1", nil), "[EMAIL_1]"); got != "[EMAIL_1]" {
		t.Errorf("deleted vault still restores: %q", got)
	}
}

// TestFailedSaveIsRetried makes the rename fail (a directory sits where the
// file goes): Tokenize must fail, and once the obstacle is gone the next
// call saves what the failed one issued, even without new values.
func TestFailedSaveIsRetried(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, nil)
	v := open(t, s, "acme", "s1", piiDetector{})
	path := s.Path("acme", "s1")
	if err := os.MkdirAll(filepath.Join(path, "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := v.Tokenize(t.Context(), "alice@example.com"); err == nil {
		t.Fatalf("Tokenize with an unwritable vault = %q, want an error", out)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if got := tokenize(t, v, "again alice@example.com"); got != "again [EMAIL_1]" {
		t.Fatalf("Tokenize = %q", got)
	}
	_ = v.Close()
	if got := untokenize(t, open(t, newStore(t, dir, nil), "acme", "s1", nil), "[EMAIL_1]"); got != "alice@example.com" {
		t.Errorf("after restart [EMAIL_1] = %q: the retried save did not happen", got)
	}
}

// TestNoValuesInLogs captures everything the store logs, at trace level,
// through a session's life and its failures, and looks for the values.
func TestNoValuesInLogs(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &buf, JSONFormat: true})
	dir := t.TempDir()
	values := []string{"alice@example.com", "(212) 555-0100", "4111 1111 1111 1111", "123-45-6789"}
	text := strings.Join(values, " | ")

	s := newStore(t, dir, log)
	v, err := s.Open("acme", "s1", piiDetector{})
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenize(t, v, text)
	if _, err := v.TokenizeJSON(t.Context(), json.RawMessage(`{"v":"`+values[0]+`"}`)); err != nil {
		t.Fatal(err)
	}
	untokenize(t, v, tok)
	_ = v.Close()

	s2 := newStore(t, dir, log) // restart: load
	v2 := open(t, s2, "acme", "s1", &failingDetector{})
	if _, err := v2.Tokenize(t.Context(), text); err == nil {
		t.Fatal("Tokenize with a failing detector succeeded")
	} else {
		checkNoValues(t, "error", err.Error(), values)
	}
	if err := os.WriteFile(s2.Path("acme", "s2"), []byte(`{"version":1,"entries":[{"type":"EMAIL","n":1,"value":"`+values[0]+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Open("acme", "s2", nil); err == nil {
		t.Fatal("Open of a corrupt vault succeeded")
	} else {
		checkNoValues(t, "error", err.Error(), values)
	}

	logs := buf.String()
	if !strings.Contains(logs, "vault loaded") || !strings.Contains(logs, "new vault") || !strings.Contains(logs, "vault saved") {
		t.Fatalf("the store logged too little to check:\n%s", logs)
	}
	checkNoValues(t, "logs", logs, values)
	if strings.Contains(logs, "[EMAIL_1]") {
		t.Errorf("logs name a token:\n%s", logs)
	}
}

func checkNoValues(t *testing.T, what, s string, values []string) {
	t.Helper()
	for _, v := range values {
		if strings.Contains(s, v) {
			t.Errorf("%s contain %q:\n%s", what, v, s)
		}
	}
}
