package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/core/config"
)

// TestReconfigure applies reloaded server lists to a running catalog of
// real reference servers: an added server connects and its tools and
// stubs appear; a changed one restarts (a new process); a removed one
// stops and its tools and stubs go; a tenant-scoped change is kept for a
// restart.
func TestReconfigure(t *testing.T) {
	dir := t.TempDir()
	mem := memoryServer(t, dir)
	servers := filepath.Join(t.TempDir(), "servers")
	c := start(t, Options{ServersDir: servers}, mem)
	before, _ := c.Server("memory")

	fs := filesystemServer(t, dir)
	r := c.Reconfigure(&config.Config{MCPServers: []*config.MCPServer{mem, fs}})
	if len(r.Added) != 1 || r.Added[0] != "filesystem" || len(r.Removed)+len(r.Changed)+len(r.Kept) != 0 {
		t.Fatalf("add: %+v", r)
	}
	eventually(t, "filesystem's tools", time.Minute, func() bool { _, ok := c.Tool("filesystem", "read_text_file"); return ok })
	if _, err := os.Stat(filepath.Join(servers, "filesystem")); err != nil {
		t.Errorf("no stubs for the added server: %v", err)
	}
	if now, _ := c.Server("memory"); now.PID != before.PID {
		t.Errorf("an unchanged server was restarted: pid %d -> %d", before.PID, now.PID)
	}

	mem2 := *mem
	mem2.Timeout = 45 * time.Second
	r = c.Reconfigure(&config.Config{MCPServers: []*config.MCPServer{&mem2, fs}})
	if len(r.Changed) != 1 || r.Changed[0] != "memory" {
		t.Fatalf("change: %+v", r)
	}
	eventually(t, "memory to reconnect in a new process", time.Minute, func() bool {
		now, _ := c.Server("memory")
		return now.State == StateReady && now.PID != 0 && now.PID != before.PID
	})

	scoped := *fs
	scoped.Scope = config.ScopeTenant
	r = c.Reconfigure(&config.Config{MCPServers: []*config.MCPServer{&mem2, &scoped}})
	if r.Kept["filesystem"] == "" || len(r.Changed) != 0 {
		t.Fatalf("tenant-scoped change: %+v", r)
	}

	r = c.Reconfigure(&config.Config{MCPServers: []*config.MCPServer{&mem2}})
	if len(r.Removed) != 1 || r.Removed[0] != "filesystem" {
		t.Fatalf("remove: %+v", r)
	}
	if _, ok := c.Tool("filesystem", "read_text_file"); ok {
		t.Error("a removed server's tool is still in the catalog")
	}
	if _, ok := c.Server("filesystem"); ok {
		t.Error("a removed server is still listed")
	}
	if _, err := os.Stat(filepath.Join(servers, "filesystem")); !os.IsNotExist(err) {
		t.Errorf("a removed server's stubs remain: %v", err)
	}
	if _, ok := c.Tool("memory", "read_graph"); !ok {
		t.Error("the remaining server lost its tools")
	}
}

// TestRemovedMidCall: a call in flight when a reload removes its server
// fails saying so, not that the server is being restarted.
func TestRemovedMidCall(t *testing.T) {
	ev := everythingServer(t, nil)
	c := start(t, Options{}, ev)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "default", "everything", "trigger-long-running-operation", json.RawMessage(`{"duration": 3600, "steps": 2}`))
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	c.Reconfigure(&config.Config{})
	err := <-errc
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "was removed by a config reload") || strings.Contains(err.Error(), "restarted") {
		t.Fatalf("call in flight: %v, want one saying the server was removed", err)
	}
}

// TestChangedMidCall: a call in flight when a reload changes its server
// fails saying so, not that the server went away.
func TestChangedMidCall(t *testing.T) {
	ev := everythingServer(t, nil)
	c := start(t, Options{}, ev)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "default", "everything", "trigger-long-running-operation", json.RawMessage(`{"duration": 3600, "steps": 2}`))
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	changed := *ev
	changed.Timeout = 45 * time.Second
	c.Reconfigure(&config.Config{MCPServers: []*config.MCPServer{&changed}})
	err := <-errc
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "was changed by a config reload during the call") || strings.Contains(err.Error(), "went away") {
		t.Fatalf("call in flight: %v, want one saying the server was changed", err)
	}
}
