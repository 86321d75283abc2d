package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testutil"
)

func TestPrivateDir(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string
	}{
		{"created", func(*testing.T, string) {}, ""},
		{"existing private", func(t *testing.T, dir string) { mkdir(t, dir, 0o700) }, ""},
		{"existing readable", func(t *testing.T, dir string) { mkdir(t, dir, 0o755) }, ""},
		{"group writable", func(t *testing.T, dir string) { mkdir(t, dir, 0o770) }, "writable by group or others"},
		{"world writable sticky", func(t *testing.T, dir string) { mkdir(t, dir, 0o777|os.ModeSticky) }, "writable by group or others"},
		{"not a directory", func(t *testing.T, dir string) {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a directory"},
		{"someone else's", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to chown")
			}
			mkdir(t, dir, 0o700)
			if err := os.Chown(dir, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}, "belongs to uid 4242"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			tt.setup(t, dir)
			err := privateDir(dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o022 != 0 {
					t.Errorf("mode %v", fi.Mode())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Chmod, not Mkdir's mode, so the umask does not interfere.
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// daemon is one Run in a goroutine.
type daemon struct {
	stop context.CancelFunc
	// done is closed when Run returned err.
	done   chan struct{}
	err    error
	stderr *testutil.Buffer
}

func start(t *testing.T, o Options) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{stop: cancel, done: make(chan struct{}), stderr: &testutil.Buffer{}}
	o.Stderr = d.stderr
	go func() {
		d.err = Run(ctx, o)
		close(d.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(15 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	return d
}

// ready waits until Status answers on sock or the daemon ends. The daemon's
// tests speak the control API with its generated client, not the client
// SDK: imports run from the client to the api, never into the daemon.
func (d *daemon) ready(t *testing.T, sock string) cexecv1.ControlClient {
	t.Helper()
	c := controlClient(t, sock)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			t.Fatalf("daemon ended before ready: %v\n%s", d.err, d.stderr)
		default:
		}
		if _, err := c.Status(context.Background(), &cexecv1.StatusRequest{}); err == nil {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("socket %s not ready\n%s", sock, d.stderr)
	return nil
}

// controlClient is a control API client on the unix socket sock.
func controlClient(t *testing.T, sock string) cexecv1.ControlClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///cexecd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return cexecv1.NewControlClient(conn)
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "cexec.hcl")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunLifecycle(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "cexecd.sock")
	cfg := writeConfig(t, dir, `cexec {
  data_dir = "data"
  socket   = "run/cexecd.sock"
}
`)
	d := start(t, Options{ConfigFile: cfg})
	c := d.ready(t, sock)

	st, err := c.Status(context.Background(), &cexecv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if int(st.Pid) != os.Getpid() || st.ConfigFile != cfg || st.Socket != sock || st.Plugins.GetTotal() != 0 {
		t.Errorf("status = %v", st)
	}
	for path, want := range map[string]os.FileMode{sock: 0o600, filepath.Dir(sock): 0o700, filepath.Join(dir, "data"): 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	if !strings.Contains(d.stderr.String(), "socket ready") {
		t.Errorf("no 'socket ready' log line:\n%s", d.stderr)
	}

	// A second daemon on the same socket refuses, naming the first's pid,
	// and leaves the socket alone.
	var second testutil.Buffer
	err = Run(context.Background(), Options{ConfigFile: cfg, Stderr: &second})
	if !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second Run = %v, want ErrAlreadyRunning with pid", err)
	}
	if ExitCode(err) != 3 {
		t.Errorf("exit code %d, want 3", ExitCode(err))
	}
	if _, err := c.Status(context.Background(), &cexecv1.StatusRequest{}); err != nil {
		t.Fatalf("first daemon disturbed: %v", err)
	}

	d.stop()
	select {
	case <-d.done:
		if d.err != nil {
			t.Fatalf("Run = %v, want nil after cancel", d.err)
		}
	case <-time.After(DefaultShutdownTimeout + time.Second):
		t.Fatal("shutdown not bounded")
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after shutdown: %v", err)
	}
	if _, err := controlClient(t, sock).Status(context.Background(), &cexecv1.StatusRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("Status after shutdown: %v, want Unavailable", err)
	}
}

func TestRunRemovesStaleSocket(t *testing.T) {
	dir := t.TempDir()
	// Without a config file the daemon's folders are relative to the
	// working directory; keep them out of the source tree.
	t.Chdir(dir)
	sock := filepath.Join(dir, "cexecd.sock")
	// A socket file nobody listens on, as a crashed daemon leaves it.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	_ = ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatal(err)
	}

	d := start(t, Options{Overrides: config.Overrides{Socket: sock, DataDir: filepath.Join(dir, "data")}})
	d.ready(t, sock)
	if !strings.Contains(d.stderr.String(), "removed stale socket") {
		t.Errorf("stale socket not reported:\n%s", d.stderr)
	}
}

// TestRunRefusesNonSocket: a -socket that names a file (or a folder) is
// refused, and the file is left as it was.
func TestRunRefusesNonSocket(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "folder")
	mkdir(t, folder, 0o700)
	for _, tt := range []struct{ path, kind string }{{file, "a regular file"}, {folder, "a directory"}} {
		err := Run(context.Background(), Options{Stderr: &testutil.Buffer{},
			Overrides: config.Overrides{Socket: tt.path, DataDir: filepath.Join(dir, "data")}})
		if err == nil || !strings.Contains(err.Error(), "exists and is not a socket ("+tt.kind+")") {
			t.Errorf("Run on %s = %v, want a refusal", tt.kind, err)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "precious" {
		t.Errorf("the file is now %q, %v", b, err)
	}
	if _, err := os.Stat(file + ".lock"); err == nil {
		t.Error("a lock file was left beside the file")
	}
}

func TestRunRefusesSharedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	mkdir(t, dir, 0o777)
	err := Run(context.Background(), Options{Stderr: &testutil.Buffer{},
		Overrides: config.Overrides{Socket: filepath.Join(dir, "cexecd.sock"), DataDir: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("Run = %v, want refusal", err)
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"unknown block", "cexec {\n  data_dir = \"d\"\n}\n\nfrobnicate {}\n", "cexec.hcl:5:1: error: Unsupported block type"},
		{"wrong type", "cexec {\n  data_dir = [1]\n}\n", "cexec.hcl:2:"},
		{"unknown plugin kind", "cexec {\n  data_dir = \"d\"\n}\nplugin \"frobnicator\" \"x\" {}\n", "cexec.hcl:4:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, t.TempDir(), tt.body)
			for name, fn := range map[string]func(context.Context, Options) error{"run": Run, "validate": Validate} {
				var stderr testutil.Buffer
				err := fn(context.Background(), Options{ConfigFile: cfg, Stderr: &stderr})
				if !errors.Is(err, ErrInvalidConfig) || ExitCode(err) != 1 {
					t.Errorf("%s = %v, want ErrInvalidConfig", name, err)
				}
				if !strings.Contains(stderr.String(), tt.want) {
					t.Errorf("%s stderr lacks %q:\n%s", name, tt.want, stderr.String())
				}
			}
		})
	}
}

// TestPluginStartFailure: a plugin whose process fails is no mistake in the
// file, so Run says which plugin failed and why, not "invalid
// configuration", beside the diagnostic at its block.
func TestPluginStartFailure(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"exits", "echo 'cannot open the model file' >&2\nexit 1", "its stderr ended with: cannot open the model file"},
		// It stays up, so the handshake fails on its output, not its exit.
		{"not a plugin", "echo hello\nexec sleep 10", `the plugin wrote "hello" on stdout`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "bin", "cexec-plugin-selector-broken"), []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := writeConfig(t, dir, "cexec {\n  data_dir = \"data\"\n  socket   = \"run/cexecd.sock\"\n}\n\nplugin \"selector\" \"broken\" {}\n")
			var stderr testutil.Buffer
			err := Run(context.Background(), Options{ConfigFile: cfg, Stderr: &stderr})
			if err == nil || errors.Is(err, ErrInvalidConfig) || ExitCode(err) != 1 {
				t.Fatalf("Run = %v, want a failure that is not ErrInvalidConfig", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "start plugins: plugin selector.broken failed to start: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("Run = %q, want which plugin failed to start and %q", msg, tt.want)
			}
			if !strings.Contains(stderr.String(), "cexec.hcl:6:1: error: Plugin failed to start") {
				t.Errorf("stderr lacks the diagnostic at the plugin block:\n%s", stderr.String())
			}
		})
	}
}

func TestValidateOK(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "cexec {\n  data_dir = \"d\"\n}\n")
	if err := Validate(context.Background(), Options{ConfigFile: cfg, Stderr: &testutil.Buffer{}}); err != nil {
		t.Fatal(err)
	}
}
