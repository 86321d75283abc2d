package plugintest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// hostSocket checks a backend that declares HostMounts: a unix socket
// mounted at runtime.HostSocket is reachable from the program, which makes
// its host calls there with the execution's HostToken and not through
// Exec's Host.
func (s *sandboxSuite) hostSocket(t *testing.T) {
	if !s.caps.HostMounts {
		t.Skip("the backend relays host calls (Capabilities.HostMounts is false)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The sandbox's user may be another than this process's.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	const token = "conformance-token"
	direct := &Host{OnCall: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"via":"socket"}`), nil
	}}
	served := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				served <- err
				return
			}
			r := bufio.NewReader(c)
			got, err := runtime.ReadHostHello(r)
			if err == nil && got.Op == runtime.HelloControl {
				// The zygote may ask to be controlled through the socket;
				// this host does not offer it.
				_ = runtime.WriteHostRefusal(c, "this host takes host calls only")
				c.Close()
				continue
			}
			if err == nil && got.Token != token {
				err = fmt.Errorf("hello carried token %q, want %q", got.Token, token)
			}
			if err != nil {
				_ = runtime.WriteHostRefusal(c, err.Error())
				c.Close()
				served <- err
				return
			}
			served <- runtime.ServeHostCalls(t.Context(), r, c, direct, 0)
			c.Close()
			return
		}
	}()

	id := fmt.Sprintf("conformance-%d-%d", os.Getpid(), s.seq.Add(1))
	mounts := []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}, {Source: path, Target: runtime.HostSocket}}
	if _, err := s.sb.Create(t.Context(), sandbox.CreateRequest{ID: id, Tenant: "tenant-conformance", Mounts: mounts}); err != nil {
		t.Fatalf("create %s with the host socket mounted: %v", id, err)
	}
	defer func() {
		if err := s.sb.Destroy(context.Background(), id); err != nil && !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("destroy %s: %v", id, err)
		}
	}()
	relayed := &Host{}
	ctx, cancel := context.WithTimeout(t.Context(), execTimeout)
	defer cancel()
	res, err := s.sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, HostToken: token,
		Code: `import cexec; print(cexec.call_tool("files", "read", {"path": "a.txt"})["via"])`}, relayed)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v, result %+v, error %+v, stderr %q", err, res, res.Error, relayed.Stderr())
	}
	if relayed.Stdout() != "socket\n" || len(relayed.Calls()) != 0 || len(direct.Calls()) != 1 {
		t.Errorf("stdout %q, %d calls relayed, %d on the socket; want the one call on the socket", relayed.Stdout(), len(relayed.Calls()), len(direct.Calls()))
	}
	ln.Close()
	if err := <-served; err != nil {
		t.Errorf("host socket: %v", err)
	}
}
