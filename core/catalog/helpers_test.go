package catalog

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/testpeers"
)

// repoRoot is the repository's top directory.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func filesystemServer(t testing.TB, dir string) *config.MCPServer {
	return &config.MCPServer{Name: "filesystem", Transport: config.TransportStdio, Command: testpeers.Bin(t, "mcp-server-filesystem"), Args: []string{dir}, Timeout: 30 * time.Second}
}

func memoryServer(t testing.TB, dir string) *config.MCPServer {
	return &config.MCPServer{Name: "memory", Transport: config.TransportStdio, Command: testpeers.Bin(t, "mcp-server-memory"),
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}, Timeout: 30 * time.Second}
}

func everythingServer(t testing.TB, env map[string]string) *config.MCPServer {
	return &config.MCPServer{Name: "everything", Transport: config.TransportStdio, Command: testpeers.Bin(t, "mcp-server-everything"), Args: []string{"stdio"}, Env: env, Timeout: 30 * time.Second}
}

// start builds and starts a catalog of servers whose stubs go to a temp
// servers directory, closing it when the test ends.
func start(t testing.TB, opts Options, servers ...*config.MCPServer) *Catalog {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testpeers.Logger(t, "catalog", hclog.Debug)
	}
	if opts.ServersDir == "" {
		opts.ServersDir = filepath.Join(t.TempDir(), "servers")
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	cfg := &config.Config{Daemon: config.Daemon{DataDir: t.TempDir()}, MCPServers: servers}
	c, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Start waits for required servers only; the tests look at the
	// optional ones' first attempt too.
	for _, u := range c.set().list {
		select {
		case <-u.first:
		case <-ctx.Done():
			t.Fatalf("server %s: no first connection attempt ended: %v", u.cfg.Name, ctx.Err())
		}
	}
	if opts.Scanner != nil {
		if err := c.RefreshLocal(ctx); err != nil {
			t.Fatalf("RefreshLocal: %v", err)
		}
	}
	return c
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runPeer starts a reference server as a plain process (for the HTTP and
// SSE transports) and waits until its port accepts connections. kill stops
// it at once (also done when the test ends).
func runPeer(t testing.TB, bin string, port int, args ...string) (kill func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PORT=" + strconv.Itoa(port)}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	eventually(t, "the server to listen", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return kill
}
