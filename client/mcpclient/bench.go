// Package mcpclient is the client side of cexecd's MCP face: the
// execute_code latency benchmark that `cexecctl bench mcp` runs, which can
// time another MCP server's code tool the same way (a peer, for ratios).
// Where the face listens, the names it answers to and an http.Client for
// its private unix socket are in api/endpoint, which the daemon shares.
package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/internal/ctxsleep"
)

// BenchOptions configure BenchExecute.
type BenchOptions struct {
	// URL is the streamable HTTP endpoint: http://127.0.0.1:7797/mcp, or
	// endpoint.UnixBaseURL+endpoint.MCPPath with HTTPClient = endpoint.UnixClient(socket).
	URL        string
	HTTPClient *http.Client
	// Command, when set, is an MCP server each session starts over stdio
	// instead of connecting to URL: another runtime, measured by the same
	// client and the same calls.
	Command []string
	// Tool is the tool called (default execute_code) and CodeArg the
	// argument the program goes in (default code).
	Tool, CodeArg string
	// OnServer, when set, is given the pid of each server Command starts.
	OnServer func(pid int)
	// Token is sent as a bearer token when set; Tenant as endpoint.TenantHeader.
	Token  string
	Tenant string
	// Code is the program; default "print(1+1)".
	Code string
	// Persistent runs each call in its session's persistent interpreter
	// (execute_code's persistent): no fork per execution.
	Persistent bool
	// Want is the stdout every call must start with; default "2\n" for the
	// default program, nothing otherwise.
	Want string
	// N calls are measured after Warmup unmeasured ones (defaults 200, 10).
	N, Warmup int
	// OnCall, when set, is called after each call, warm-up included (for a
	// progress display).
	OnCall func()
	// OnMeasureStart and OnMeasureEnd, when set, are called just before
	// the first measured call (every session warm) and after the last:
	// the window for CPU figures, which a server's start and warm-up would
	// otherwise swamp.
	OnMeasureStart, OnMeasureEnd func()
	// Pace, when set, is a pause before each measured call, as an agent's
	// turns come: what a pause costs the next call is then in the figures
	// (PerSecond counts the pauses too).
	Pace time.Duration
	// Clients is how many MCP sessions call at once, each N calls after
	// its warmup (default 1). Behind a load balancer the sessions spread
	// over the replicas, so executions per second compare deployments.
	Clients int
}

// BenchResult holds the latency of execute_code calls, as an agent sees it:
// from sending tools/call to having the result.
type BenchResult struct {
	N                             int
	Min, P50, P90, P99, Max, Mean time.Duration
	// PerSecond is measured executions per second of wall time, all
	// clients together.
	PerSecond float64
}

// String formats the result on one line.
func (r BenchResult) String() string {
	return fmt.Sprintf("n=%d min=%s p50=%s p90=%s p99=%s max=%s mean=%s %.1f/s",
		r.N, r.Min, r.P50, r.P90, r.P99, r.Max, r.Mean, r.PerSecond)
}

// BenchExecute opens o.Clients MCP sessions over streamable HTTP; each
// calls execute_code o.Warmup times, then, once all are warm, o.N times in
// a row, checking every result. It is what `cexecctl bench mcp` runs
// against a daemon.
func BenchExecute(ctx context.Context, o BenchOptions) (BenchResult, error) {
	if o.Code == "" {
		o.Code = "print(1+1)"
		if o.Want == "" {
			o.Want = "2\n"
		}
	}
	if o.N <= 0 {
		o.N = 200
	}
	if o.Warmup <= 0 {
		o.Warmup = 10
	}
	if o.Clients <= 0 {
		o.Clients = 1
	}
	if o.Tool == "" {
		o.Tool = "execute_code"
	}
	if o.CodeArg == "" {
		o.CodeArg = "code"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Every session warms up, then measures, then keeps its connection
	// until all have measured: a stdio server's CPU is read while it runs.
	var (
		warm, measured, done sync.WaitGroup
		start, end           = make(chan struct{}), make(chan struct{})
		mu                   sync.Mutex
		times                []time.Duration
		errs                 []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	warm.Add(o.Clients)
	measured.Add(o.Clients)
	done.Add(o.Clients)
	for range o.Clients {
		go func() {
			defer done.Done()
			ts, err := benchSession(ctx, o, session{warm: &warm, measured: &measured, start: start, end: end})
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			times = append(times, ts...)
			mu.Unlock()
		}()
	}
	warm.Wait()
	if o.OnMeasureStart != nil {
		o.OnMeasureStart()
	}
	began := time.Now()
	close(start)
	measured.Wait()
	wall := time.Since(began)
	if o.OnMeasureEnd != nil {
		o.OnMeasureEnd()
	}
	close(end)
	done.Wait()
	if len(errs) > 0 {
		return BenchResult{}, errs[0] // the first; the others ended with it
	}
	r := summarize(times)
	r.PerSecond = float64(len(times)) / wall.Seconds()
	return r, nil
}

// pause waits d, or until ctx ends. A variable, so that tests count the
// pauses rather than time them.
var pause = ctxsleep.Sleep

// session is how one client of BenchExecute keeps step with the others:
// it says so on warm once warm, waits for start, says so on measured when
// its calls are done (or it failed) and closes its connection at end.
type session struct {
	warm, measured *sync.WaitGroup
	start, end     <-chan struct{}
}

// benchSession is one client of BenchExecute: it returns its measured call
// times.
func benchSession(ctx context.Context, o BenchOptions, s session) (_ []time.Duration, err error) {
	warmed, finished := false, false
	defer func() {
		if !warmed {
			s.warm.Done()
		}
		if !finished {
			s.measured.Done()
		}
	}()
	c, stderr, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cexec-bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initialize %s: %w%s", target(o), err, said(stderr))
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = o.Tool
	args := map[string]any{o.CodeArg: o.Code}
	if o.Persistent {
		args["persistent"] = true
	}
	req.Params.Arguments = args
	times := make([]time.Duration, 0, o.N)
	for i := range o.Warmup + o.N {
		if i == o.Warmup {
			warmed = true
			s.warm.Done()
			select {
			case <-s.start:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if i >= o.Warmup && o.Pace > 0 {
			if err := pause(ctx, o.Pace); err != nil {
				return nil, err
			}
		}
		began := time.Now()
		res, err := c.CallTool(ctx, req)
		d := time.Since(began)
		if err != nil {
			return nil, fmt.Errorf("%s call %d: %w%s", o.Tool, i+1, err, said(stderr))
		}
		if err := check(res, o.Want); err != nil {
			return nil, fmt.Errorf("%s call %d: %w", o.Tool, i+1, err)
		}
		if i >= o.Warmup {
			times = append(times, d)
		}
		if o.OnCall != nil {
			o.OnCall()
		}
	}
	finished = true
	s.measured.Done()
	select {
	case <-s.end:
	case <-ctx.Done():
	}
	return times, nil
}

func check(res *mcp.CallToolResult, want string) error {
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return errors.New("error result: " + text.String())
	}
	// cexec's warnings come first, one line each: a sandbox replaced at
	// the pool's max_uses ends a persistent interpreter, and says so.
	out := text.String()
	for strings.HasPrefix(out, warningPrefix) {
		_, out, _ = strings.Cut(out, "\n")
	}
	if !strings.HasPrefix(out, want) {
		return fmt.Errorf("output %q does not start with %q", text.String(), want)
	}
	return nil
}

// warningPrefix starts each line of cexec's warnings in execute_code's text.
const warningPrefix = "[cexec: "

func summarize(times []time.Duration) BenchResult {
	if len(times) == 0 {
		return BenchResult{}
	}
	s := slices.Clone(times)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return BenchResult{
		N: len(s), Min: s[0], P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: s[len(s)-1],
		Mean: sum / time.Duration(len(s)),
	}
}
