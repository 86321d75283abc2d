package bwrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// fakeEtc writes a host /etc under a new root (returned): readable files,
// a symlink, a private directory and a file only its owner may read. Copies
// go to a temporary directory of the test's.
func fakeEtc(t *testing.T) string {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	files := []struct {
		path string
		data string
		perm os.FileMode
	}{
		{"etc/ld.so.cache", "cache", 0o644},
		{"etc/ssl/certs/ca.pem", "ca", 0o644},
		{"etc/ssl/private/key.pem", "secret key", 0o600},
		{"etc/mime.types", "owner only", 0o600},
		{"etc/os-release", "ID=test", 0o644},
	}
	for _, f := range files {
		p := filepath.Join(root, f.path)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(f.data), f.perm))
	}
	must(t, os.Chmod(filepath.Join(root, "etc/ssl/private"), 0o700))
	must(t, os.Symlink("certs/ca.pem", filepath.Join(root, "etc/ssl/cert.pem")))
	must(t, os.WriteFile(filepath.Join(root, "etc/shadow"), []byte("root:x"), 0o644))
	return root
}

func TestEtcCopy(t *testing.T) {
	v := etcView{root: fakeEtc(t), log: hclog.NewNullLogger()}
	c, err := v.acquire(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer v.close()
	defer v.release(c)

	tests := []struct {
		path string
		want string // "" means absent
	}{
		{"ld.so.cache", "cache"},
		{"ssl/certs/ca.pem", "ca"},
		{"ssl/cert.pem", "ca"}, // through the copied symlink
		{"os-release", "ID=test"},
		{"passwd", passwdData},
		{"group", groupData},
		{"hosts", hostsData},
		{"resolv.conf", ""},
		// Not readable by other users on the host: left out.
		{"ssl/private/key.pem", ""},
		{"mime.types", ""},
		// Not in etcFiles.
		{"shadow", ""},
	}
	for _, tt := range tests {
		data, err := os.ReadFile(filepath.Join(c.dir, tt.path))
		switch {
		case tt.path == "resolv.conf" && (err != nil || len(data) != 0):
			t.Errorf("resolv.conf: %q, %v; want an empty file", data, err)
		case tt.want == "" && tt.path != "resolv.conf" && err == nil:
			t.Errorf("%s copied: %q", tt.path, data)
		case tt.want != "" && string(data) != tt.want:
			t.Errorf("%s = %q, %v; want %q", tt.path, data, err, tt.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(c.dir, "ssl/private")); err == nil {
		t.Error("the private directory was copied")
	}
	for _, p := range []string{"", "ssl", "ssl/certs"} {
		if fi, err := os.Stat(filepath.Join(c.dir, p)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%q: %v, %v; want a 0755 directory", p, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(c.dir, "ld.so.cache")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("ld.so.cache mode %v, %v", fi.Mode(), err)
	}
}

// TestEtcRefresh changes the host's /etc: sandboxes started after the next
// check get a new copy, those before keep theirs until they are gone. The
// check runs in the background, so the sandbox that finds it due starts on
// the copy it would have got a moment earlier.
func TestEtcRefresh(t *testing.T) {
	root := fakeEtc(t)
	v := etcView{root: root, log: hclog.NewNullLogger()}
	t0 := time.Now()
	first, err := v.acquire(t0)
	if err != nil {
		t.Fatal(err)
	}
	cert := filepath.Join(root, "etc/ssl/certs/ca.pem")
	must(t, os.WriteFile(cert, []byte("new ca"), 0o644))
	must(t, os.Chtimes(cert, t0.Add(time.Minute), t0.Add(time.Minute)))

	acquire := func(at time.Duration) *etcCopy {
		t.Helper()
		c, err := v.acquire(t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		v.bg.Wait()
		return c
	}
	if before := acquire(etcRecheck / 2); before != first {
		t.Error("the copy was rebuilt before its recheck was due")
	}
	if due := acquire(etcRecheck); due != first {
		t.Error("the sandbox that found the recheck due waited for a new copy")
	}
	after := acquire(etcRecheck + time.Second)
	if after == first {
		t.Fatal("a changed /etc was not copied again")
	}
	if data, _ := os.ReadFile(filepath.Join(after.dir, "ssl/certs/ca.pem")); string(data) != "new ca" {
		t.Errorf("new copy has %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(first.dir, "ssl/certs/ca.pem")); string(data) != "ca" {
		t.Errorf("a running sandbox's copy changed: %q", data)
	}
	if same := acquire(3 * etcRecheck); same != after {
		t.Error("an unchanged /etc was copied again")
	}
	if same := acquire(3*etcRecheck + time.Second); same != after {
		t.Error("an unchanged /etc was copied again")
	}

	// first, at t0, and the sandboxes before and at the recheck.
	v.release(first)
	v.release(first)
	if _, err := os.Stat(first.dir); err != nil {
		t.Fatal("the old copy went while a sandbox still used it")
	}
	v.release(first)
	if _, err := os.Stat(first.dir); !os.IsNotExist(err) {
		t.Errorf("the old copy stayed after its last sandbox: %v", err)
	}
	v.close()
	if _, err := os.Stat(after.dir); err != nil {
		t.Fatal("close removed a copy sandboxes still use")
	}
	for range 3 {
		v.release(after)
	}
	if _, err := os.Stat(after.dir); !os.IsNotExist(err) {
		t.Errorf("the copy stayed after close and its last sandbox: %v", err)
	}
}

// TestEtcRefreshFails: a new copy that cannot be written leaves sandboxes
// starting on the earlier one, says why, and is tried again at the next
// check.
func TestEtcRefreshFails(t *testing.T) {
	root := fakeEtc(t)
	var logged strings.Builder
	v := etcView{root: root, log: hclog.New(&hclog.LoggerOptions{Output: &logged})}
	t0 := time.Now()
	first, err := v.acquire(t0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.close()
	must(t, os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("ID=changed"), 0o644))
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "gone"))

	for _, at := range []time.Duration{etcRecheck, etcRecheck + time.Second} {
		c, err := v.acquire(t0.Add(at))
		if err != nil || c != first {
			t.Fatalf("acquire at %v: %v, %v; want the earlier copy", at, c, err)
		}
		v.bg.Wait()
	}
	if !strings.Contains(logged.String(), "sandboxes keep the earlier copy of /etc") {
		t.Errorf("log = %q; want the failed copy reported", logged.String())
	}

	t.Setenv("TMPDIR", t.TempDir())
	if _, err := v.acquire(t0.Add(2 * etcRecheck)); err != nil {
		t.Fatal(err)
	}
	v.bg.Wait()
	c, err := v.acquire(t0.Add(2*etcRecheck + time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(c.dir, "os-release")); string(data) != "ID=changed" {
		t.Errorf("after the failure the copy has %q; want the change", data)
	}
}
