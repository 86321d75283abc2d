package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/mcpface"
)

// listen opens the face's listeners: the unix socket next to the control
// socket (nil when its directory is not private) and, when addr is set, TCP.
func (m *mcpServer) listen(addr string) (unix, tcp net.Listener, err error) {
	if err := ownerOnly(filepath.Dir(m.sock)); err != nil {
		// The unix socket trusts its tenant header, so only the daemon's
		// user may reach it. The control socket asks less of its
		// directory, and the daemon stays useful without MCP.
		m.log.Error("not serving MCP on the unix socket: cexecctl mcp cannot connect", "socket", m.sock, "error", err)
		m.socketOff = err.Error()
	} else if unix, err = mcpface.ListenUnix(m.sock); err != nil {
		return nil, nil, err
	}
	if addr != "" {
		if tcp, err = m.face.ListenTCP(addr); err != nil {
			if unix != nil {
				_ = unix.Close()
				m.removeSocket()
			}
			return nil, nil, err
		}
	}
	m.unix = unix != nil
	if tcp != nil {
		m.listenAddr = tcp.Addr().String()
	}
	return unix, tcp, nil
}

// state is where the face serves, for Status.
func (m *mcpServer) state() control.MCPState {
	st := control.MCPState{SocketOff: m.socketOff, Listen: m.listenAddr}
	if m.unix {
		st.Socket = m.sock
	}
	return st
}

// ownerOnly checks that dir is accessible to its owner alone (mode 0700).
func ownerOnly(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("its directory %s has mode %04o; make it 0700 with `chmod 700 %s` and restart cexecd (under systemd: RuntimeDirectoryMode=0700)", dir, perm, dir)
	}
	return nil
}

func (m *mcpServer) removeSocket() {
	if err := os.Remove(m.sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("cannot remove mcp socket", "socket", m.sock, "error", err)
	}
}
