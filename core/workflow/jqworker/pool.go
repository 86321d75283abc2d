package jqworker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cexec/cexec/internal/tailbuf"
)

// Size is how many workers a pool runs at most: evaluations take
// microseconds, so a few serve many runs, and while some tenants' slow
// expressions hold workers the others still have one. It also bounds the
// memory expressions can take to Size × MemoryLimit.
const Size = 4

// ErrMemory: the expression made its worker grow past MemoryLimit.
var ErrMemory = fmt.Errorf("used more than %d MiB of memory, the limit of one expression", MemoryLimit>>20)

// ErrClosed: the pool was closed.
var ErrClosed = errors.New("expression workers are stopped")

// Pool evaluates expressions in worker processes, one evaluation per
// worker at a time. Workers start when first needed and stay until Close;
// one that dies, or is killed because its evaluation ran out of time, is
// replaced by the next evaluation that needs one. It is safe for
// concurrent use.
type Pool struct {
	mu     sync.Mutex
	idle   []*worker
	live   map[*worker]struct{}
	closed bool
	// busy counts the evaluations that have a place (at most Size), held
	// them by tenant; waiting are the evaluations waiting for one, oldest
	// first.
	busy    int
	held    map[string]int
	waiting []*waiter
}

// waiter is an evaluation waiting for a place; ready is closed when it has
// one.
type waiter struct {
	tenant string
	ready  chan struct{}
}

// NewPool returns a pool; it starts no process until an evaluation needs one.
func NewPool() *Pool {
	return &Pool{live: map[*worker]struct{}{}, held: map[string]int{}}
}

// Eval runs the jq program src over data, with the variables names (without
// the $, sorted) set to vals, and returns its first result, or nil when it
// gives none. An error from jq has jq's text.
//
// It waits for a place among the Size while ctx lasts. A place freed while
// evaluations wait goes to the waiting tenant that holds the fewest, so
// that one tenant's slow expressions delay another's by at most one
// evaluation and never use up its time: limit (none when 0) bounds the
// evaluation from when it has its place. When ctx ends or limit passes
// first, the worker is killed and Eval returns the context's error
// (context.DeadlineExceeded for limit).
func (p *Pool) Eval(ctx context.Context, tenant string, limit time.Duration, src string, data any, names []string, vals []any) (any, error) {
	req, err := encodeRequest(src, names, data, vals)
	if err != nil {
		return nil, err
	}
	if err := p.acquire(ctx, tenant); err != nil {
		return nil, err
	}
	defer p.release(tenant)
	// The limit counts from when the expression has its worker: neither
	// the wait for a place nor a new worker's start is the expression's.
	w, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		p.put(w)
		return nil, err
	}
	v, err := w.eval(ctx, req)
	p.put(w)
	return v, err
}

// acquire takes a place for an evaluation of tenant, waiting while ctx
// lasts when all are taken.
func (p *Pool) acquire(ctx context.Context, tenant string) error {
	p.mu.Lock()
	if p.busy < Size && len(p.waiting) == 0 {
		p.busy++
		p.held[tenant]++
		p.mu.Unlock()
		return nil
	}
	w := &waiter{tenant: tenant, ready: make(chan struct{})}
	p.waiting = append(p.waiting, w)
	p.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case <-w.ready:
		// Given a place as ctx ended: hand it on.
		p.mu.Unlock()
		p.release(tenant)
	default:
		p.waiting = slices.DeleteFunc(p.waiting, func(x *waiter) bool { return x == w })
		p.mu.Unlock()
	}
	return ctx.Err()
}

// release gives back tenant's place: to the waiting tenant that holds the
// fewest (the oldest waiter among equals), else to the pool.
func (p *Pool) release(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[tenant]--; p.held[tenant] == 0 {
		delete(p.held, tenant)
	}
	p.busy--
	for p.busy < Size && len(p.waiting) > 0 {
		next := 0
		for i, w := range p.waiting {
			if p.held[w.tenant] < p.held[p.waiting[next].tenant] {
				next = i
			}
		}
		w := p.waiting[next]
		p.waiting = slices.Delete(p.waiting, next, next+1)
		p.busy++
		p.held[w.tenant]++
		close(w.ready)
	}
}

// Close kills the workers; evaluations after it fail with ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	for w := range p.live {
		w.kill()
	}
	p.mu.Unlock()
	for _, w := range idle {
		w.reap()
	}
}

// get takes an idle worker or starts one, waiting for its start while ctx
// lasts.
func (p *Pool) get(ctx context.Context) (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	w, err := startWorker(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		w.kill()
		w.reap()
		return nil, ErrClosed
	}
	p.live[w] = struct{}{}
	return w, nil
}

// put takes a worker back after an evaluation: to the idle ones when it is
// sound, else it is gone (eval killed and reaped it).
func (p *Pool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.broken || p.closed {
		delete(p.live, w)
		if !w.broken {
			w.kill()
			w.reap()
		}
		return
	}
	p.idle = append(p.idle, w)
}

// worker is one worker process.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.Closer
	w      *bufio.Writer
	r      *bufio.Reader
	stderr *stderrLog
	// broken: the worker was killed or failed; it serves no more.
	broken bool
	// mu makes kill and reap exclusive, so that no kill reaches a process
	// group whose id was freed by reaping and taken by another.
	mu     sync.Mutex
	reaped bool
	waited error
}

// startWorker starts a worker and waits, while ctx lasts, for its ready
// frame.
func startWorker(ctx context.Context) (*worker, error) {
	w, err := spawnWorker()
	if err != nil {
		return nil, fmt.Errorf("start an expression worker: %w", err)
	}
	stop := context.AfterFunc(ctx, w.kill)
	ready, err := readFrame(w.r, 1, nil)
	if !stop() {
		w.kill()
		w.reap()
		return nil, ctx.Err()
	}
	if err != nil || len(ready) != 1 || ready[0] != answerReady {
		w.kill()
		return nil, fmt.Errorf("start an expression worker: %w", w.died())
	}
	return w, nil
}

func spawnWorker() (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, Flag)
	cmd.Path = selfExe(exe)
	// The worker needs nothing of cexecd's environment (which may hold
	// secrets): one CPU is enough for one evaluation at a time, and the Go
	// collector works harder as the heap nears the hard limit.
	cmd.Env = []string{"GOMAXPROCS=1", "GOMEMLIMIT=" + strconv.Itoa(MemoryLimit*3/4)}
	setProcAttr(cmd)
	w := &worker{cmd: cmd, stderr: newStderrLog()}
	cmd.Stderr = w.stderr
	// Blocking pipes: a read waits in the kernel and wakes its thread
	// directly when the answer comes, without a trip through the network
	// poller, which made an empty round trip 40% slower (28 µs against 20
	// on 2 CPUs). A kill still ends the wait: the pipe closes.
	inR, inW, err := blockingPipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := blockingPipe()
	if err != nil {
		_, _ = inR.Close(), inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	_, _ = inR.Close(), outW.Close()
	if err != nil {
		_, _ = inW.Close(), outR.Close()
		return nil, err
	}
	w.in, w.out = inW, outR
	w.w = bufio.NewWriterSize(w.in, 64<<10)
	w.r = bufio.NewReaderSize(outR, 64<<10)
	return w, nil
}

// eval sends one request and reads its answer. The worker is killed when
// ctx ends first, or when it answers with more than MaxResult.
func (w *worker) eval(ctx context.Context, req []byte) (any, error) {
	stop := context.AfterFunc(ctx, w.kill)
	err := writeFrame(w.w, req)
	var ans []byte
	if err == nil {
		ans, err = readFrame(w.r, 1+MaxResult, nil)
	}
	if !stop() {
		// ctx ended: the worker is killed, or being killed, even if its
		// answer made it.
		w.broken = true
		w.kill()
		w.reap()
		if err != nil {
			return nil, ctx.Err()
		}
	}
	if err != nil {
		w.broken = true
		w.kill()
		var big errFrameTooLarge
		if errors.As(err, &big) {
			w.reap()
			return nil, tooLarge(int64(big.size) - 1)
		}
		return nil, w.died()
	}
	if len(ans) == 0 {
		w.broken = true
		w.kill()
		return nil, w.died()
	}
	switch body := ans[1:]; ans[0] {
	case answerNone:
		return nil, nil
	case answerError:
		return nil, errors.New(string(body))
	case answerTooLarge:
		n, _ := strconv.ParseInt(string(body), 10, 64)
		return nil, tooLarge(n)
	case answerValue:
		v, err := decodeValue(body)
		var syn *json.SyntaxError
		if errors.As(err, &syn) && strings.Contains(syn.Error(), "exceeded max depth") {
			// encoding/json's bound, which every JSON value cexecd reads
			// (tool results, inputs, journals) meets too.
			return nil, errors.New("gave a result nested more than 10000 levels deep, the most cexecd reads")
		}
		if err != nil {
			return nil, fmt.Errorf("read the result: %w", err)
		}
		return v, nil
	}
	w.broken = true
	w.kill()
	return nil, w.died()
}

func tooLarge(n int64) error {
	return fmt.Errorf("gave a result of %.1f MiB, more than %d MiB, the limit of one expression's result", float64(n)/(1<<20), MaxResult>>20)
}

// died reaps the worker, which ended or broke the protocol, and says why:
// ErrMemory when it ran out of memory.
func (w *worker) died() error {
	err := w.reap()
	if w.stderr.outOfMemory() || w.crashedLarge() {
		return ErrMemory
	}
	why := "it ended"
	if err != nil {
		why = err.Error()
	}
	if msg := w.stderr.first(); msg != "" {
		why += ": " + msg
	}
	return fmt.Errorf("the expression's worker process failed (%s)", why)
}

// blockingPipe is os.Pipe with its ends in blocking mode (Fd sets it).
func blockingPipe() (r, w *os.File, err error) {
	if r, w, err = os.Pipe(); err != nil {
		return nil, nil, err
	}
	r.Fd()
	w.Fd()
	return r, w, nil
}

// crashedLarge reports whether the worker crashed (was not killed) after
// it had grown past half its limit. When the limit is reached inside the Go
// collector rather than the allocator, the runtime may crash on a nil
// pointer (SIGSEGV) instead of saying "out of memory".
func (w *worker) crashedLarge() bool {
	st := w.cmd.ProcessState
	if st == nil {
		return false
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return false
	}
	ru, ok := st.SysUsage().(*syscall.Rusage)
	return ok && ru.Maxrss*1024 > MemoryLimit/2
}

// kill ends the worker's process group, unless it was reaped.
func (w *worker) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.reaped {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// reap closes the worker's stdin and waits for it to end, once. Every
// caller has killed it or is done with it, so it ends at once.
func (w *worker) reap() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.reaped {
		_ = w.in.Close()
		w.waited = w.cmd.Wait()
		_ = w.out.Close()
		w.reaped = true
	}
	return w.waited
}

// stderrLog keeps the start of a worker's stderr, where the Go runtime puts
// the reason it died ("fatal error: runtime: out of memory"), and its end.
type stderrLog struct {
	mu   sync.Mutex
	head []byte
	tail *tailbuf.Buffer
}

const headSize = 1024

func newStderrLog() *stderrLog { return &stderrLog{tail: tailbuf.New(4096)} }

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	if n := min(len(p), headSize-len(l.head)); n > 0 {
		l.head = append(l.head, p[:n]...)
	}
	l.mu.Unlock()
	return l.tail.Write(p)
}

// outOfMemory reports whether the worker died for want of memory, in the
// Go runtime's words or the race detector's.
func (l *stderrLog) outOfMemory() bool {
	l.mu.Lock()
	s := string(l.head)
	l.mu.Unlock()
	for _, w := range []string{"out of memory", "cannot allocate memory", "(errno: 12)", "too many address space collisions"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// first is the first line the worker wrote, or the end of what it wrote
// when that is empty.
func (l *stderrLog) first() string {
	l.mu.Lock()
	s := string(l.head)
	l.mu.Unlock()
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		s = strings.TrimSpace(l.tail.String())
	}
	return s
}
