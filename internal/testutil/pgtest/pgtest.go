// Package pgtest starts a real PostgreSQL (Debian's postgresql package) for
// a test: initdb in a temporary folder, the server on a free port of
// 127.0.0.1, stopped at cleanup. As root the server runs as nobody, since
// PostgreSQL refuses to run as root. A test without the binaries is
// skipped, or fails under CI (testutil.SkipMissing).
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cexec/cexec/internal/testutil"
)

// nobody is the user the server runs as when the test runs as root.
const nobody = 65534

// BinDir returns the newest installed PostgreSQL's bin folder, or "".
func BinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	return ""
}

// Server is a running PostgreSQL.
type Server struct {
	// DSN reaches the server's postgres database as its superuser.
	DSN string

	port       int
	data, sock string
	logs       *testutil.Buffer
	command    func(name string, args ...string) *exec.Cmd
	cmd        *exec.Cmd
	exited     chan struct{}
}

// Start runs a fresh PostgreSQL for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := BinDir()
	if bin == "" {
		testutil.SkipMissing(t, "PostgreSQL is not installed (apt-get install postgresql; scripts/deps.sh does)")
	}
	dir, err := os.MkdirTemp("", "cexec-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "run")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: nobody, Gid: nobody}
		for _, p := range []string{dir, data, sock} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	if out, err := command("initdb", "-D", data, "-U", "cexec", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s := &Server{port: freePort(t), logs: &testutil.Buffer{}, command: command, data: data, sock: sock}
	s.DSN = fmt.Sprintf("postgres://cexec@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	t.Cleanup(func() {
		s.Stop(t)
		if t.Failed() {
			t.Logf("postgres log:\n%s", s.logs)
		}
	})
	s.Restart(t)
	return s
}

// Stop shuts the server down (fast shutdown: clients are disconnected);
// Restart starts it again on the same port and data. Stopping a stopped
// server does nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	// SIGINT is PostgreSQL's fast shutdown.
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Restart starts a stopped server (Start starts it the first time) and
// waits until it takes connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.cmd != nil {
		t.Fatal("pgtest: Restart of a running server")
	}
	cmd := s.command("postgres", "-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.DSN)
		if err == nil {
			_ = conn.Close(ctx)
			return
		}
		select {
		case <-exited:
			t.Fatalf("postgres exited: %v\n%s", cmd.ProcessState, s.logs)
		case <-ctx.Done():
			t.Fatalf("postgres not ready after 60s: %v\n%s", err, s.logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
