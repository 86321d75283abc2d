package catalog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client/transport"
)

// cexecd starts a stdio server itself and hands mcp-go the pipes
// (transport.NewIO) rather than letting mcp-go's stdio transport spawn it:
// that transport reads the child's stdout from a pipe of its own and skips
// every line that is not a JSON-RPC message without a word, so a server
// that prints a banner, a debug line or a broken answer where its answer
// belongs leaves the call waiting for its timeout and nobody learns why.
// Reading the pipe through a stdoutWatch lets cexecd count and quote such
// lines; the bytes reach mcp-go unchanged.

// tappedStdio is mcp-go's stdio transport over a process cexecd runs.
type tappedStdio struct {
	*transport.Stdio
	proc *stdioProcess
}

// newTappedStdio prepares the process and the transport; Start runs it.
func newTappedStdio(proc *stdioProcess, log *slog.Logger, onStray func(line []byte)) (tappedStdio, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return tappedStdio{}, fmt.Errorf("create stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return tappedStdio{}, fmt.Errorf("create stdout pipe: %w", err)
	}
	proc.stdinR, proc.stdoutW, proc.stdoutR = stdinR, stdoutW, stdoutR
	watch := &stdoutWatch{src: bufio.NewReaderSize(stdoutR, 64<<10), onStray: onStray}
	t := transport.NewIO(watch, stdinW, nil)
	transport.WithCommandLogger(log)(t)
	return tappedStdio{Stdio: t, proc: proc}, nil
}

func (t tappedStdio) Start(ctx context.Context) error {
	if err := t.proc.start(ctx); err != nil {
		return err
	}
	return t.Stdio.Start(ctx)
}

// Close closes the server's stdin (mcp-go's Close) and then, as mcp-go
// does for a process it spawned, waits for the server to exit, asking
// with SIGTERM and then SIGKILL if it does not.
func (t tappedStdio) Close() error {
	err := t.Stdio.Close()
	if werr := t.proc.stop(); err == nil {
		err = werr
	}
	return err
}

func (t tappedStdio) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.Stdio.SendRequest(ctx, req)
	if err == nil {
		checkDiscover(req, resp)
		tap(ctx, req, resp)
	}
	return resp, err
}

// stdioProcess is what a stdio connection knows about its child.
type stdioProcess struct {
	// build makes the command, bound to the connection's context.
	build  func(ctx context.Context) *exec.Cmd
	stderr *lineLogger
	// The child's ends of its stdin and stdout, closed in cexecd once it
	// started; cexecd's end of stdout, closed after it exited.
	stdinR, stdoutW, stdoutR *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopOnce sync.Once
	stopErr  error
}

func (p *stdioProcess) start(ctx context.Context) error {
	cmd := p.build(ctx)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.stdinR, p.stdoutW, p.stderr
	err := cmd.Start()
	// The child has its own copies; with cexecd's gone, the child's exit
	// ends the stdout stream.
	p.stdinR.Close()
	p.stdoutW.Close()
	if err != nil {
		return fmt.Errorf("failed to start command: %w", err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	return nil
}

// Shutdown waits of mcp-go's stdio transport, kept for the processes
// cexecd now starts itself.
const (
	gracefulExit = 2 * time.Second
	termExit     = 3 * time.Second
)

// stop reaps the child once its stdin is closed: it waits gracefulExit for
// it to exit, then sends SIGTERM and waits termExit, then kills it.
func (p *stdioProcess) stop() error {
	p.stopOnce.Do(func() {
		defer p.stdoutR.Close()
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		if cmd == nil {
			p.stdinR.Close()
			p.stdoutW.Close()
			return
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		waitFor := func(d time.Duration) bool {
			select {
			case p.stopErr = <-exited:
				return true
			case <-time.After(d):
				return false
			}
		}
		if waitFor(gracefulExit) {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if waitFor(termExit) {
			return
		}
		_ = cmd.Process.Kill()
		if !waitFor(termExit) {
			p.stopErr = transport.ErrChildShutdownTimeout
		}
	})
	return p.stopErr
}

func (p *stdioProcess) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stdoutWatch passes a stdio server's stdout on line by line, handing each
// line that is not a JSON-RPC message to onStray first.
type stdoutWatch struct {
	src     *bufio.Reader
	onStray func(line []byte)
	pending []byte
	err     error
	// long follows a line longer than src's buffer, passed on in pieces.
	long longLine
}

func (w *stdoutWatch) Read(p []byte) (int, error) {
	if len(w.pending) == 0 {
		if w.err != nil {
			return 0, w.err
		}
		w.pending, w.err = w.next()
		if len(w.pending) == 0 {
			return 0, w.err
		}
	}
	n := copy(p, w.pending)
	w.pending = w.pending[n:]
	return n, nil
}

// next reads up to the end of a line, handed on from src's buffer, which
// stays valid until the next read of src. A line that fits is checked
// whole; a longer one piece by piece, without being assembled.
func (w *stdoutWatch) next() ([]byte, error) {
	piece, err := w.src.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		w.long.add(piece)
		return piece, nil
	}
	switch {
	case w.long.on:
		w.long.add(piece)
		if w.long.stray() {
			w.onStray(w.long.head)
		}
		w.long.reset()
	case len(piece) > 0 && stray(piece):
		w.onStray(piece)
	}
	return piece, err
}

// jsonrpcKey is the member every JSON-RPC message has.
var jsonrpcKey = []byte(`"jsonrpc"`)

// longLine is the shape of a line seen in pieces: enough to tell a
// message from what is not (see stray), and its start to quote.
type longLine struct {
	on          bool
	head        []byte
	first, last byte // first and last bytes that are not space
	key         bool // jsonrpcKey seen
	tail        []byte
}

// headMax is how much of a long line is kept to quote, ample for
// strayQuote after masking.
const headMax = 1 << 10

func (l *longLine) add(p []byte) {
	l.on = true
	if len(l.head) < headMax {
		l.head = append(l.head, p[:min(len(p), headMax-len(l.head))]...)
	}
	if t := bytes.TrimSpace(p); len(t) > 0 {
		if l.first == 0 {
			l.first = t[0]
		}
		l.last = t[len(t)-1]
	}
	if !l.key {
		// The key may straddle two pieces.
		seam := append(l.tail, p[:min(len(p), len(jsonrpcKey)-1)]...)
		l.key = bytes.Contains(seam, jsonrpcKey) || bytes.Contains(p, jsonrpcKey)
		l.tail = append(l.tail[:0], p[max(0, len(p)-(len(jsonrpcKey)-1)):]...)
	}
}

func (l *longLine) stray() bool {
	return l.first != 0 && (l.first != '{' || l.last != '}' || !l.key)
}

func (l *longLine) reset() {
	*l = longLine{head: l.head[:0], tail: l.tail[:0]}
}

// stray reports whether line is something other than a JSON-RPC message,
// which the client would skip. Every line is checked for a message's shape
// (a JSON object with a jsonrpc member), which catches banners, prints, log
// records and cut-off answers at the cost of a byte search; lines up to
// validateMax bytes are also validated, which catches a broken answer such
// as Python's json.dumps writing NaN, for about a microsecond per KiB,
// while a longer answer is left to the client's decoding alone rather than
// scanned once more. Blank lines do no harm and do not count.
func stray(line []byte) bool {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return false
	}
	if t[0] != '{' || t[len(t)-1] != '}' || !bytes.Contains(t, []byte(`"jsonrpc"`)) {
		return true
	}
	return len(t) <= validateMax && !json.Valid(t)
}

// validateMax is the longest line stray validates as JSON.
const validateMax = 4 << 10

// strayQuote bounds how much of a stray line the log, the status and
// errors quote.
const strayQuote = 200

// A server's stray lines are logged at most strayLogBurst at once and then
// one per strayLogEvery; the ones in between are counted in the next
// warning.
const (
	strayLogBurst = 10
	strayLogEvery = 6 * time.Second
)

// strays counts the lines a stdio server wrote on stdout that are not
// JSON-RPC messages, over all its connections.
type strays struct {
	now func() time.Time // nil: time.Now

	mu     sync.Mutex
	n      int
	last   string
	lastAt time.Time
	// lastBy is the one tenant that had requests on the server, then or
	// lately, when last was written; "" when none did, and shared when
	// several did.
	lastBy string
	// calls is, per tenant, its requests in progress and until when its
	// last one counts as lately ended.
	calls map[string]*tenantCalls
	// tokens is how many lines may be logged now, as of filled.
	tokens   float64
	filled   time.Time
	unlogged int
}

// add records line (masked and cut already) and warns of it in log unless
// that would exceed the rate limit.
func (s *strays) add(log hclog.Logger, line string) {
	s.mu.Lock()
	t := s.clock()()
	s.n++
	s.last, s.lastAt, s.lastBy = line, t, s.callers(t)
	if s.filled.IsZero() {
		s.tokens = strayLogBurst
	} else {
		s.tokens = min(strayLogBurst, s.tokens+float64(t.Sub(s.filled))/float64(strayLogEvery))
	}
	s.filled = t
	warn := s.tokens >= 1
	n, unlogged := s.n, s.unlogged
	if warn {
		s.tokens--
		s.unlogged = 0
	} else {
		s.unlogged++
	}
	s.mu.Unlock()
	if !warn {
		return
	}
	args := []any{"line", line, "lines", n}
	if unlogged > 0 {
		args = append(args, "unlogged", unlogged)
	}
	log.Warn("server wrote a line on stdout that is not JSON-RPC; the client skips it, so if it was an answer the request waits until its timeout (a stdio server must write only JSON-RPC messages on stdout and log to stderr)", args...)
}

// shared is strays.lastBy for a line several tenants may have caused.
const shared = "\x00shared"

type tenantCalls struct {
	n     int
	until time.Time
}

// strayMark is one request's view of a server's stray lines.
type strayMark struct {
	s      *strays
	tenant string
	before int
	grace  time.Duration
}

// begin marks the start of a request of tenant's, bounded by timeout,
// which is also how long after it ends a line may still be its own (a
// server printing in a call that timed out). Call end when it is over.
func (s *strays) begin(tenant string, timeout time.Duration) strayMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]*tenantCalls{}
	}
	c := s.calls[tenant]
	if c == nil {
		c = &tenantCalls{}
		s.calls[tenant] = c
	}
	c.n++
	return strayMark{s: s, tenant: tenant, before: s.n, grace: timeout}
}

func (m strayMark) end() {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	c := m.s.calls[m.tenant]
	c.n--
	c.until = m.s.clock()().Add(m.grace)
}

// since says, for the error of the request that timed out, what stray
// lines the server wrote since it began. A shared server serves every
// tenant and its lines cannot be told apart by request, so the last is
// quoted only if the request's tenant alone (or no tenant) had requests
// on the server when it was written: else one tenant's error could show
// what another's call made the server print.
func (m strayMark) since() string {
	m.s.mu.Lock()
	by := m.s.lastBy
	m.s.mu.Unlock()
	if by == "" || by == m.tenant {
		return m.s.since(m.before)
	}
	n := m.s.count() - m.before
	if n <= 0 {
		return ""
	}
	if n == 1 {
		return "; meanwhile the server wrote 1 line on stdout that is not JSON-RPC, which the client skips; not quoted here, as another tenant's call on this server may have caused it (the daemon's log has it)"
	}
	return fmt.Sprintf("; meanwhile the server wrote %d lines on stdout that are not JSON-RPC, which the client skips; not quoted here, as other tenants' calls on this server may have caused them (the daemon's log has them)", n)
}

// callers is lastBy for a line written at t; s.mu is held.
func (s *strays) callers(t time.Time) string {
	by := ""
	for tenant, c := range s.calls {
		if c.n == 0 && !t.Before(c.until) {
			delete(s.calls, tenant)
			continue
		}
		if by != "" {
			return shared
		}
		by = tenant
	}
	return by
}

func (s *strays) clock() func() time.Time {
	if s.now != nil {
		return s.now
	}
	return time.Now
}

// count is how many stray lines were written so far.
func (s *strays) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// status returns the count, the last line and when it was written.
func (s *strays) status() (int, string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.last, s.lastAt
}

// since says, for the error of a request that timed out, what stray lines
// the server wrote after count was before; "" when none.
func (s *strays) since(before int) string {
	s.mu.Lock()
	n, last := s.n-before, s.last
	s.mu.Unlock()
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return fmt.Sprintf("; meanwhile the server wrote 1 line on stdout that is not JSON-RPC, which the client skips: %s", last)
	}
	return fmt.Sprintf("; meanwhile the server wrote %d lines on stdout that are not JSON-RPC, which the client skips; the last: %s", n, last)
}

// stray records a line the server wrote on stdout that the client skips.
func (u *upstream) stray(line []byte) {
	// Control characters would end the quote in an error or drive the
	// operator's terminal.
	s := strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(string(bytes.TrimRight(line, "\r\n")), "\uFFFD"))
	u.strays.add(u.log, cutLine(u.cat.mask.Load().string(s)))
}

// cutLine cuts s to strayQuote bytes on a rune boundary.
func cutLine(s string) string {
	if len(s) <= strayQuote {
		return s
	}
	i := strayQuote
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
