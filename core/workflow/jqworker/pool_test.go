package jqworker

import (
	"context"
	"errors"
	"math/big"
	"os"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/itchyny/gojq"
)

func TestMain(m *testing.M) {
	if Requested() {
		os.Exit(Main())
	}
	os.Exit(m.Run())
}

// inProcess is what gojq gives for the same program in this process: the
// result a worker's must equal, in value and Go type, or its error text.
func inProcess(t *testing.T, src string, data any, names []string, vals []any) (any, string) {
	t.Helper()
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, err.Error()
	}
	dollar := make([]string, len(names))
	for i, n := range names {
		dollar[i] = "$" + n
	}
	code, err := gojq.Compile(q, gojq.WithVariables(dollar))
	if err != nil {
		return nil, err.Error()
	}
	v, ok := code.Run(data, vals...).Next()
	if !ok {
		return nil, ""
	}
	if err, ok := v.(error); ok {
		return nil, err.Error()
	}
	return v, ""
}

// TestEvalSameAsInProcess: a worker's first result, Go types of numbers
// included, and its error text are gojq's own in cexecd.
func TestEvalSameAsInProcess(t *testing.T) {
	p := NewPool()
	defer p.Close()
	data := map[string]any{"items": []any{map[string]any{"name": "a", "n": 1.0}, map[string]any{"name": "b", "n": 2.5}}, "s": "<&>"}
	tests := []struct{ name, src string }{
		{"map", ".items | map(.name)"},
		{"length is an int", ".items | length"},
		{"a fraction", ".items[1].n"},
		{"arithmetic", "[.items[].n] | add"},
		{"big integer", "100000000000000000000000 + 1"},
		{"html characters", ".s"},
		{"first result only", ".items[].name"},
		{"no result", "empty"},
		{"variables", "$ctx.user + \"-\" + ($i | tostring)"},
		{"null input field", ".missing"},
		{"object", "{a: 1, b: [true, null]}"},
		{"error", `error("boom")`},
		{"error with a value", `error({a: 1})`},
		{"type error", `.items + 1`},
		{"parse error", `.items[`},
		{"unknown function", `nosuch(1)`},
		{"unknown variable", `$nope`},
	}
	names, vals := []string{"ctx", "i"}, []any{map[string]any{"user": "u"}, 3}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := inProcess(t, tt.src, data, names, vals)
			got, err := p.Eval(t.Context(), "t", 0, tt.src, data, names, vals)
			if wantErr != "" {
				if err == nil || err.Error() != wantErr {
					t.Fatalf("error %v, want %q", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, ok := want.(*big.Int); ok {
				if g, ok := got.(*big.Int); !ok || g.Cmp(b) != 0 {
					t.Fatalf("got %#v, want %v", got, b)
				}
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v, want %#v", got, want)
			}
		})
	}
}

// pids are the worker processes the pool has.
func pids(p *Pool) []int {
	var out []int
	for _, w := range workers(p) {
		out = append(out, w.cmd.Process.Pid)
	}
	return out
}

func workers(p *Pool) []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*worker
	for w := range p.live {
		out = append(out, w)
	}
	return out
}

// gone reports whether no process pid exists (it was killed and reaped).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestEvalMemoryBound: an expression that allocates past MemoryLimit, at
// once or step by step, kills its worker, not cexecd (whose heap does not
// grow by what it asked for), fails with ErrMemory, and the next
// evaluation gets a new worker.
func TestEvalMemoryBound(t *testing.T) {
	p := NewPool()
	defer p.Close()
	tests := []struct{ name, src string }{
		{"one big string", `"x" * 1e9 | length`},
		{"one big array", `setpath([5e8]; 1) | length`},
		{"index assignment", `.[5e8] = 1 | length`},
		{"growing", `[range(1e8)] | length`},
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Eval(t.Context(), "t", 0, "1", nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			ws := workers(p)
			if len(ws) != 1 {
				t.Fatalf("workers %v, want one", ws)
			}
			old := []int{ws[0].cmd.Process.Pid}
			_, err := p.Eval(t.Context(), "t", 0, tt.src, nil, nil, nil)
			if !errors.Is(err, ErrMemory) {
				t.Fatalf("error %v, want %v", err, ErrMemory)
			}
			if !strings.Contains(err.Error(), "used more than 256 MiB of memory, the limit of one expression") {
				t.Fatalf("error %q", err)
			}
			if !gone(old[0]) || len(pids(p)) != 0 {
				t.Fatalf("worker %d still there (pool has %v)", old[0], pids(p))
			}
			// The bound held: the worker never grew far past it (the
			// unbounded growth would be gigabytes).
			if ru := ws[0].cmd.ProcessState.SysUsage().(*syscall.Rusage); ru.Maxrss*1024 > maxWorkerRSS {
				t.Fatalf("the worker grew to %d MiB", ru.Maxrss>>10)
			}
			if v, err := p.Eval(t.Context(), "t", 0, "1 + 1", nil, nil, nil); err != nil || v != 2 {
				t.Fatalf("after: %v, %v", v, err)
			}
			if now := pids(p); len(now) != 1 || now[0] == old[0] {
				t.Fatalf("workers %v after %d died, want a new one", now, old[0])
			}
		})
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.Sys) - int64(before.Sys); grew > 64<<20 {
		t.Fatalf("this process grew by %d MiB", grew>>20)
	}
}

// TestEvalResultBound: a result larger than MaxResult is an error, and
// never reaches this process.
func TestEvalResultBound(t *testing.T) {
	p := NewPool()
	defer p.Close()
	_, err := p.Eval(t.Context(), "t", 0, `"x" * 17e6`, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 16 MiB, the limit of one expression's result") {
		t.Fatalf("error %v", err)
	}
	if v, err := p.Eval(t.Context(), "t", 0, `"x" * 1e6 | length`, nil, nil, nil); err != nil || v != 1000000 {
		t.Fatalf("after: %v, %v", v, err)
	}
}

// TestEvalKilledWhenCtxEnds: when the caller's ctx ends (deadline or
// cancellation) during an evaluation, its worker is killed at once, even
// in a step gojq would not interrupt, and Eval returns ctx.Err().
func TestEvalKilledWhenCtxEnds(t *testing.T) {
	const spin = `reduce range(0; infinite) as $i (0; .)`
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPool()
			defer p.Close()
			if _, err := p.Eval(t.Context(), "t", 0, "1", nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			old := pids(p)
			ctx, cancel := tt.ctx()
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := p.Eval(ctx, "t", 0, spin, nil, nil, nil)
				done <- err
			}()
			if tt.want == context.Canceled {
				// Cancel once the worker has the program: the pool's slot
				// is taken and the worker is no longer idle.
				for busy(p) == 0 || idle(p) != 0 {
					runtime.Gosched()
				}
				time.Sleep(50 * time.Millisecond)
				cancel()
			}
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Fatalf("error %v, want %v", err, tt.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("Eval still runs a minute after its ctx ended")
			}
			if !gone(old[0]) {
				t.Fatalf("worker %d still runs", old[0])
			}
			if v, err := p.Eval(t.Context(), "t", 0, "2", nil, nil, nil); err != nil || v != 2 {
				t.Fatalf("after: %v, %v", v, err)
			}
		})
	}
}

func busy(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

func idle(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// TestPoolBoundAndClose: at most Size workers run, a caller waiting for
// one gives up with its ctx, and Close leaves no worker process.
func TestPoolBoundAndClose(t *testing.T) {
	p := NewPool()
	const spin = `reduce range(0; infinite) as $i (0; .)`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range Size {
		go func() { _, _ = p.Eval(ctx, "t", 0, spin, nil, nil, nil) }()
	}
	for busy(p) < Size || len(pids(p)) < Size {
		runtime.Gosched()
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer wcancel()
	if _, err := p.Eval(wctx, "t", 0, "1", nil, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fifth evaluation: %v, want it to wait until its ctx ends", err)
	}
	if n := len(pids(p)); n != Size {
		t.Fatalf("%d workers, want %d", n, Size)
	}
	running := pids(p)
	cancel()
	for busy(p) > 0 {
		runtime.Gosched()
	}
	if _, err := p.Eval(t.Context(), "t", 0, "1", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	running = append(running, pids(p)...)
	p.Close()
	for _, pid := range running {
		for i := 0; !gone(pid); i++ {
			if i > 1000 {
				t.Fatalf("worker %d still runs after Close", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := p.Eval(t.Context(), "t", 0, "1", nil, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want %v", err, ErrClosed)
	}
}

func waiting(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}

// TestFairShare: with every worker busy with one tenant's endless
// expressions, another tenant's evaluation gets the next place freed,
// ahead of the busy tenant's own evaluation that waited longer, and the
// time it waited does not count against its limit. Without that, a tenant
// holding every worker would make every other tenant's expressions fail.
func TestFairShare(t *testing.T) {
	p := NewPool()
	defer p.Close()
	const spin = `reduce range(0; infinite) as $i (0; .)`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	for i := range Size {
		c := ctx
		if i == 0 {
			c = first
		}
		go func() { _, _ = p.Eval(c, "hog", 0, spin, nil, nil, nil) }()
	}
	for busy(p) < Size {
		runtime.Gosched()
	}
	go func() { _, _ = p.Eval(ctx, "hog", 0, spin, nil, nil, nil) }()
	for waiting(p) < 1 {
		runtime.Gosched()
	}
	type result struct {
		v   any
		err error
	}
	other := make(chan result, 1)
	go func() {
		v, err := p.Eval(t.Context(), "other", 100*time.Millisecond, "1 + 1", nil, nil, nil)
		other <- result{v, err}
	}()
	for waiting(p) < 2 {
		runtime.Gosched()
	}
	// Longer than the other tenant's limit, all of it spent waiting.
	time.Sleep(300 * time.Millisecond)
	cancelFirst()
	select {
	case r := <-other:
		if r.err != nil || r.v != 2 {
			t.Fatalf("the other tenant's evaluation: %v, %v", r.v, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the other tenant got no place: the freed one went to the tenant holding every worker")
	}
}

// TestEvalResultDepth: a result nested deeper than JSON values may be read
// (encoding/json's 10000 levels) fails with a sentence saying so, not with
// the decoder's "read the result: invalid character '[' exceeded max depth".
func TestEvalResultDepth(t *testing.T) {
	p := NewPool()
	defer p.Close()
	for _, tt := range []struct {
		depth int
		want  string
	}{
		{9999, ""},
		{10001, "gave a result nested more than 10000 levels deep, the most cexecd reads"},
	} {
		v, err := p.Eval(t.Context(), "t", 0, `reduce range($n) as $i (0; [.]) | [.] | .[0]`, nil, []string{"n"}, []any{tt.depth})
		switch {
		case tt.want == "" && (err != nil || v == nil):
			t.Errorf("depth %d: %v, %v", tt.depth, v, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("depth %d: error %v, want %q", tt.depth, err, tt.want)
		}
	}
}
