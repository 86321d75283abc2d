package client

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/api/endpoint"
)

func TestSocketPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/run/cexec/cexecd.sock", "/run/cexec/cexecd.sock"},
		{"unix:///run/cexec/cexecd.sock", "/run/cexec/cexecd.sock"},
		{"unix:/run/cexec/cexecd.sock", "/run/cexec/cexecd.sock"},
		{"unix:rel.sock", "rel.sock"},
	}
	for _, tt := range tests {
		if got := SocketPath(tt.in); got != tt.want {
			t.Errorf("SocketPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDefaultAddress(t *testing.T) {
	t.Setenv(endpoint.AddressEnv, "/x/y.sock")
	if got := DefaultAddress(); got != endpoint.Address() {
		t.Errorf("DefaultAddress() = %q, want %q", got, endpoint.Address())
	}
}

func TestNotRunning(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	_ = ln.Close()

	missing := filepath.Join(dir, "missing.sock")
	// A mistyped address that names a file: no hint to start cexecd
	// there, which would replace the file with a socket.
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, address, want string
	}{
		{"missing", missing, "cexecd is not running at " + missing + " (connect: no such file or directory); start it with: cexecd -config cexec.hcl -socket " + missing},
		{"stale", "unix://" + stale, "cexecd is not running at " + stale + " (connect: connection refused); start it with: cexecd -config cexec.hcl -socket " + stale},
		{"a file", file, file + " is not a cexecd socket: it is a regular file; check --address or $CEXECD_ADDRESS"},
		{"a directory", dir, dir + " is not a cexecd socket: it is a directory; check --address or $CEXECD_ADDRESS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(context.Background(), tt.address)
			var nr *NotRunningError
			if !errors.As(err, &nr) {
				t.Fatalf("New = %v, want *NotRunningError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestNotRunningDefaultSocketHint(t *testing.T) {
	err := &NotRunningError{Socket: endpoint.DefaultSocket(), Err: errors.New("x")}
	if !strings.HasSuffix(err.Error(), "start it with: cexecd -config cexec.hcl") {
		t.Errorf("hint for the default socket names a -socket: %s", err)
	}
}
