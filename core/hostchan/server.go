// Package hostchan gives sandboxes a direct channel to the daemon for their
// host calls (call_tool and the rest), in place of the relay through the
// zygote, the backend plugin and its gRPC stream.
//
// Each sandbox of a backend that can mount host sockets
// (sandbox.Capabilities.HostMounts) gets its own unix socket, in a private
// directory of the daemon's, bound into the sandbox at runtime.HostSocket.
// Each execution gets a fresh random token, passed with the program
// (sandbox.ExecRequest.HostToken) to its process alone; a connection must
// present a token granted for an execution running in that socket's
// sandbox, and is then served by that execution's sandbox.Host, the one the
// relay path uses too: guards, PII restoring, approvals, progress, the
// session log and the per-execution bookkeeping do not know which way a
// call came. The token and its connections end with the execution; calls
// still in flight see their context cancelled, and the execution does not
// end before they have returned.
//
// The zygote may ask, while its sandbox is being created, to be controlled
// through the socket too (runtime.HelloControl): the daemon then drives
// the sandbox's executions over that connection with a runtime.Runner of
// its own, and the backend plugin is no longer on an execution's way. The
// plugin keeps the sandbox's lifecycle (create, health, destroy, and the
// kill of a zygote that misses a deadline) on its own channel.
//
// Wrap puts this in front of a backend; backends without HostMounts keep
// the relay path unchanged.
package hostchan

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// helloTimeout bounds the wait for a connection's hello frame (the
// Server's hello, which tests may raise).
const helloTimeout = 10 * time.Second

// maxConns bounds the open connections to one sandbox's socket: the
// zygote's control connection and an execution's need one each, and a
// program opening more must not run the daemon out of descriptors.
const maxConns = 8

// Server owns the sockets of the sandboxes and the executions' tokens. It
// is safe for concurrent use.
type Server struct {
	dir   string
	log   hclog.Logger
	hello time.Duration
	// owner is the directory's lock, held until Close (see sweepStale).
	owner *os.File

	mu      sync.Mutex
	sockets map[string]*socket // by sandbox id
	grants  map[string]*grant  // by token
	closed  bool
}

// socket is one sandbox's listener.
type socket struct {
	sandbox string
	path    string
	ln      *net.UnixListener
	done    sync.WaitGroup

	// runnerOpts configure the runner of a control connection.
	runnerOpts runtime.Options

	mu    sync.Mutex
	conns map[*net.UnixConn]struct{}
	// refusedLogged: a refused token or control request is logged once
	// per sandbox, so that a program cannot flood the log.
	refusedLogged bool
	// sealed: the sandbox has been created, so no control request is
	// taken any more (programs may run from then on).
	sealed bool
	// control drives the zygote through the socket, once it asked.
	control *control
}

// control is the daemon's side of a zygote that is controlled through its
// socket.
type control struct {
	runner *runtime.Runner
	// pid is the zygote's process on the host, from the connection's
	// credentials (0 when unknown).
	pid   int
	busy  atomic.Bool
	execs atomic.Int64
}

// grant is one execution's right to the socket of its sandbox.
type grant struct {
	sandbox string
	host    sandbox.Host
	ctx     context.Context
	cancel  context.CancelFunc
	// conn is the connection that presented the token; one per token.
	conn  net.Conn
	calls sync.WaitGroup
}

// New makes a private directory (mode 0700) under parent ("" for the
// system's temporary directory) for the sockets. Other host users cannot
// reach into it; a sandbox reaches its own socket through its mount alone
// (the backend binds it as the daemon's user, or as root in a mount
// namespace of its own). It first removes the directories that daemons
// which died before Close left under parent.
func New(parent string, log hclog.Logger) (*Server, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if removed, err := sweepStale(parent); err != nil {
		log.Warn("could not remove the socket directories of a daemon that is gone", "error", err)
	} else if len(removed) > 0 {
		log.Info("removed the socket directories of a daemon that is gone", "dirs", removed)
	}
	dir, err := os.MkdirTemp(parent, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("host call sockets: %w", err)
	}
	owner, err := holdDir(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("host call sockets: %w", err)
	}
	return &Server{dir: dir, log: log, hello: helloTimeout, owner: owner, sockets: map[string]*socket{}, grants: map[string]*grant{}}, nil
}

// Dir is the directory holding the sockets.
func (s *Server) Dir() string { return s.dir }

// Open creates the socket of sandbox id and returns the mount that puts it
// at runtime.HostSocket. owner, when set, is the host user the sandbox runs
// as: the socket is then its alone; otherwise any user of the sandbox may
// connect (the backend may run it as a user of its own choosing), and the
// private directory keeps everyone else out. ro configures the runner of
// the zygote's control connection, which it may open until Seal.
func (s *Server) Open(id string, owner *sandbox.HostUser, ro runtime.Options) (sandbox.Mount, error) {
	name, err := randomHex(16)
	if err != nil {
		return sandbox.Mount{}, err
	}
	path := filepath.Join(s.dir, name+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return sandbox.Mount{}, fmt.Errorf("host call socket of sandbox %s: %w", id, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := restrict(path, owner); err != nil {
		_ = ln.Close()
		return sandbox.Mount{}, fmt.Errorf("host call socket of sandbox %s: %w", id, err)
	}
	if ro.Logger == nil {
		ro.Logger = s.log.With("sandbox", id)
	}
	sk := &socket{sandbox: id, path: path, ln: ln, runnerOpts: ro, conns: map[*net.UnixConn]struct{}{}}
	s.mu.Lock()
	if s.closed || s.sockets[id] != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return sandbox.Mount{}, fmt.Errorf("host call socket of sandbox %s: the server is closed or the sandbox has one", id)
	}
	s.sockets[id] = sk
	s.mu.Unlock()
	sk.done.Add(1)
	go s.accept(sk)
	return sandbox.Mount{Source: path, Target: runtime.HostSocket}, nil
}

// restrict makes the socket connectable by the sandbox's user only, when
// it is known and the daemon can hand the socket over; otherwise by any
// user who reaches it, which only the sandbox's mount does.
func restrict(path string, owner *sandbox.HostUser) error {
	if owner != nil && os.Geteuid() == 0 {
		if err := os.Chown(path, int(owner.UID), int(owner.GID)); err != nil {
			return err
		}
		return os.Chmod(path, 0o600)
	}
	return os.Chmod(path, 0o666)
}

// Has reports whether sandbox id has a socket.
func (s *Server) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sockets[id] != nil
}

// Seal ends the time in which sandbox id's zygote may ask for control:
// call it once the sandbox has been created, before any program runs.
func (s *Server) Seal(id string) {
	if sk := s.socket(id); sk != nil {
		sk.mu.Lock()
		sk.sealed = true
		sk.mu.Unlock()
	}
}

func (s *Server) socket(id string) *socket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sockets[id]
}

// controlOf is sandbox id's control connection, or nil.
func (s *Server) controlOf(id string) *control {
	sk := s.socket(id)
	if sk == nil {
		return nil
	}
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.control
}

// CloseSandbox closes the socket of sandbox id, if it has one.
func (s *Server) CloseSandbox(id string) {
	s.mu.Lock()
	sk := s.sockets[id]
	delete(s.sockets, id)
	s.mu.Unlock()
	if sk != nil {
		_ = sk.ln.Close()
		sk.mu.Lock()
		for c := range sk.conns {
			_ = c.Close()
		}
		ctl := sk.control
		sk.mu.Unlock()
		if ctl != nil {
			_ = ctl.runner.Close()
		}
		sk.done.Wait()
	}
}

// Close closes every socket and removes the directory. Executions still
// running keep their grants until they end.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ids := make([]string, 0, len(s.sockets))
	for id := range s.sockets {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.CloseSandbox(id)
	}
	err := os.RemoveAll(s.dir)
	_ = s.owner.Close()
	return err
}

// Grant lets the execution running in sandbox id make host calls on its
// socket, answered by host with a context derived from ctx, and returns
// the token to pass to it. revoke ends the grant: it cancels the calls in
// flight, closes the connection and returns once the calls have returned.
func (s *Server) Grant(ctx context.Context, id string, host sandbox.Host) (token string, revoke func(), err error) {
	token, err = randomHex(32)
	if err != nil {
		return "", nil, err
	}
	g := &grant{sandbox: id, host: host}
	g.ctx, g.cancel = context.WithCancel(ctx)
	s.mu.Lock()
	s.grants[token] = g
	s.mu.Unlock()
	return token, func() { s.revoke(token, g) }, nil
}

func (s *Server) revoke(token string, g *grant) {
	s.mu.Lock()
	delete(s.grants, token)
	conn := g.conn
	g.conn = nil
	s.mu.Unlock()
	g.cancel()
	if conn != nil {
		_ = conn.Close()
	}
	g.calls.Wait()
}

// claim binds conn to the grant of token if that grant is for sandbox id
// and has no connection yet.
func (s *Server) claim(id, token string, conn net.Conn) (*grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.grants[token]
	switch {
	case g == nil || g.sandbox != id:
		return nil, errors.New("unknown or expired host token")
	case g.conn != nil:
		return nil, errors.New("the host token is already in use by another connection")
	}
	g.conn = conn
	g.calls.Add(1)
	return g, nil
}

func (s *Server) accept(sk *socket) {
	defer sk.done.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := sk.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("host call socket: accept", "sandbox", sk.sandbox, "error", err)
			}
			return
		}
		sk.mu.Lock()
		full := len(sk.conns) >= maxConns
		if !full {
			sk.conns[c] = struct{}{}
		}
		sk.mu.Unlock()
		if full {
			_ = runtime.WriteHostRefusal(c, fmt.Sprintf("more than %d connections to the host socket", maxConns))
			_ = c.Close()
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			s.serve(sk, c)
			sk.mu.Lock()
			delete(sk.conns, c)
			sk.mu.Unlock()
		}()
	}
}

// serve checks a connection's token and answers its calls, or takes the
// zygote's control request.
func (s *Server) serve(sk *socket, c *net.UnixConn) {
	defer func() { _ = c.Close() }()
	id := sk.sandbox
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(s.hello))
	hello, err := runtime.ReadHostHello(r)
	if err != nil {
		_ = runtime.WriteHostRefusal(c, err.Error())
		s.log.Debug("host call socket: bad hello", "sandbox", id, "error", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if hello.Op == runtime.HelloControl {
		s.serveControl(sk, r, c)
		return
	}
	g, err := s.claim(id, hello.Token, c)
	if err != nil {
		_ = runtime.WriteHostRefusal(c, err.Error())
		sk.mu.Lock()
		first := !sk.refusedLogged
		sk.refusedLogged = true
		sk.mu.Unlock()
		if first {
			s.log.Warn("host call socket: refused a connection (logged once per sandbox)", "sandbox", id, "reason", err)
		}
		return
	}
	defer g.calls.Done()
	if err := runtime.ServeHostCalls(g.ctx, r, c, g.host, 0); err != nil && g.ctx.Err() == nil {
		s.log.Warn("host call socket: connection broken", "sandbox", id, "error", err)
	}
}

// serveControl takes the zygote's control request when the sandbox is
// still being created and has no control connection yet, and keeps the
// connection's runner until the connection ends.
func (s *Server) serveControl(sk *socket, r *bufio.Reader, c *net.UnixConn) {
	sk.mu.Lock()
	taken := sk.sealed || sk.control != nil
	var ctl *control
	first := false
	if taken {
		first = !sk.refusedLogged
		sk.refusedLogged = true
	} else {
		// The runner reads nothing before the welcome makes the zygote
		// talk, and writes only what an execution queues.
		ctl = &control{runner: runtime.NewRunner(c, readCloser{r, c}, sk.runnerOpts), pid: peerPID(c)}
		sk.control = ctl
	}
	sk.mu.Unlock()
	if taken {
		_ = runtime.WriteHostRefusal(c, "control is taken only from the zygote, while its sandbox is created")
		if first {
			s.log.Warn("host call socket: refused a control request after the sandbox was created (logged once per sandbox)", "sandbox", sk.sandbox)
		}
		return
	}
	if err := runtime.WriteHostWelcome(c); err != nil {
		_ = ctl.runner.Close()
		return
	}
	s.log.Debug("zygote controlled through its socket", "sandbox", sk.sandbox, "pid", ctl.pid)
	<-ctl.runner.Done()
}

// peerPID is the host pid of the process at the other end of c, or 0.
func peerPID(c *net.UnixConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cred == nil {
		return 0
	}
	return int(cred.Pid)
}

// readCloser reads through r what c receives, and closes c.
type readCloser struct {
	*bufio.Reader
	c *net.UnixConn
}

func (rc readCloser) Close() error { return rc.c.Close() }

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
