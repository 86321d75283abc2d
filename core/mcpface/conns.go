package mcpface

import (
	"net"
	"net/netip"
	"sync"

	"github.com/cexec/cexec/core/metrics"
)

// capListener caps a TCP listener's open connections, overall and per peer
// IP. A connection over a cap is closed as soon as it is accepted, so it
// holds neither a descriptor nor a goroutine; netutil.LimitListener would
// instead stop accepting, leaving a flood in the backlog ahead of everyone
// else, and has no per-peer cap.
type capListener struct {
	net.Listener
	max, perPeer int
	onRefuse     func(peer netip.Addr)

	mu    sync.Mutex
	total int
	peers map[netip.Addr]int
}

func newCapListener(ln net.Listener, maxConns, perPeer int, onRefuse func(netip.Addr)) *capListener {
	return &capListener{Listener: ln, max: maxConns, perPeer: perPeer, onRefuse: onRefuse, peers: map[netip.Addr]int{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer := peerAddr(c.RemoteAddr())
		if l.take(peer) {
			return &cappedConn{Conn: c, l: l, peer: peer}, nil
		}
		_ = c.Close()
		metrics.MCPConnectionRefused()
		if l.onRefuse != nil {
			l.onRefuse(peer)
		}
	}
}

func (l *capListener) take(peer netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || l.peers[peer] >= l.perPeer {
		return false
	}
	l.total++
	l.peers[peer]++
	metrics.MCPConnection(1)
	return true
}

func (l *capListener) release(peer netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	metrics.MCPConnection(-1)
	if l.peers[peer]--; l.peers[peer] <= 0 {
		delete(l.peers, peer)
	}
}

// peerAddr is the IP of a TCP peer (IPv4-mapped addresses as IPv4, so one
// host is one peer); the zero Addr for anything else.
func peerAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// cappedConn gives its slot back once, however often it is closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	peer netip.Addr
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.peer) })
	return err
}
