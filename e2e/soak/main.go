// Command soak is the soak and chaos test of a real cexecd (`make soak`).
//
// It writes a config with the default plugins (sandbox bwrap, selector
// embeddings, guard pii, codegen rules), the pinned server-everything as
// the upstream and -tenants tenant blocks, starts cexecd on a private
// socket and data directory, and runs -n executions through the MCP face
// (the daemon's private MCP socket, one tenant per session, as agents reach
// it). Every program calls the upstream's echo with an e-mail address,
// saves a state file and prints a phone number. The harness checks every
// reply as it comes: no raw PII of the ones it generated, every failure an
// error that says what went wrong, and it records each acknowledged state
// write.
//
// The run is ten segments. After each, with nothing in flight and no MCP
// session open, it samples the daemon (RSS, descriptors, goroutines), every
// plugin's and the upstream's RSS, the processes below cexecd and each
// tenant's disk use. With -chaos, segments 2-6 SIGKILL the sandbox, guard,
// selector and codegen plugins and the upstream server halfway through
// their executions, and segment 9 SIGKILLs cexecd itself and starts it
// again on the same data directory. At the end every acknowledged state
// write is read back through the daemon.
//
// It exits 1 when a check or a bound fails (see -h for the bounds), 2 when
// the run could not be made.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/api/endpoint"
)

type options struct {
	n, tenants, concurrency int
	json, chaos, keep       bool
	cexecd, pluginDir       string
	peers                   string
	sessionExecs            int
	logLevel                string
	daemonLogLevel          string
	bounds                  bounds
}

// bounds are what the daemon must hold between two quiescent samples of
// the same daemon process.
type bounds struct {
	RSSGrowthMiB   int64 `json:"daemon_rss_growth_mib"`
	FDSlack        int   `json:"daemon_fd_slack"`
	GoroutineSlack int   `json:"goroutine_slack"`
	ProcSlack      int   `json:"process_slack"`
	// A tenant's disk may grow by TenantKiBPerExec per execution (its
	// session log entry, state file and vault entries) and
	// TenantKiBPerSession per MCP session (a log, its metadata and a vault:
	// three files of at least a block each).
	TenantKiBPerExec    int64 `json:"tenant_kib_per_exec"`
	TenantKiBPerSession int64 `json:"tenant_kib_per_session"`
}

const segments = 10

// chaosAt says what is SIGKILLed halfway through each segment.
var chaosAt = map[int]string{
	1: "plugin sandbox",
	2: "plugin guard",
	3: "plugin selector",
	4: "plugin codegen",
	5: "upstream",
	8: "daemon",
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 100000, "executions")
	flag.IntVar(&o.tenants, "tenants", 20, "tenants, each declared with a tenant block")
	flag.IntVar(&o.concurrency, "concurrency", 8, "executions in flight")
	flag.BoolVar(&o.json, "json", false, "print the report as JSON")
	flag.BoolVar(&o.chaos, "chaos", true, "SIGKILL each plugin, the upstream and finally cexecd during the run")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (config, data, cexecd.log); it is always kept when a check fails")
	flag.StringVar(&o.cexecd, "cexecd", "bin/cexecd", "the cexecd binary")
	flag.StringVar(&o.pluginDir, "plugin-dir", "bin", "where the plugin binaries are")
	flag.StringVar(&o.peers, "peers", "test/peers/node_modules", "the pinned MCP peers (scripts/deps.sh installs them)")
	flag.IntVar(&o.sessionExecs, "session-execs", 200, "executions per MCP session before the harness opens a new one")
	flag.StringVar(&o.logLevel, "log-level", "info", "the harness's log level (stderr)")
	flag.StringVar(&o.daemonLogLevel, "daemon-log-level", "info", "cexecd's log level (its log is in the run's directory)")
	flag.Int64Var(&o.bounds.RSSGrowthMiB, "max-rss-growth", 32, "bound: daemon RSS growth in MiB between quiescent samples")
	flag.IntVar(&o.bounds.FDSlack, "fd-slack", 10, "bound: daemon descriptors above the warm baseline")
	flag.IntVar(&o.bounds.GoroutineSlack, "goroutine-slack", 30, "bound: daemon goroutines above the warm baseline")
	flag.IntVar(&o.bounds.ProcSlack, "proc-slack", 8, "bound: processes below cexecd above the warm baseline")
	flag.Int64Var(&o.bounds.TenantKiBPerExec, "tenant-kib-per-exec", 8, "bound: a tenant's disk growth per execution, in KiB")
	flag.Int64Var(&o.bounds.TenantKiBPerSession, "tenant-kib-per-session", 16, "bound: a tenant's disk growth per MCP session, in KiB")
	flag.Parse()
	log := hclog.New(&hclog.LoggerOptions{Name: "soak", Level: hclog.LevelFromString(o.logLevel), Output: os.Stderr})
	if o.n < segments || o.tenants < 1 || o.concurrency < 1 || o.sessionExecs < 1 {
		log.Error("-n must be at least 10; -tenants, -concurrency and -session-execs at least 1")
		os.Exit(2)
	}
	// The config lives in a temp dir: relative paths would resolve there.
	for _, p := range []*string{&o.cexecd, &o.pluginDir, &o.peers} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			log.Error("resolve path", "path", *p, "error", err)
			os.Exit(2)
		}
		*p = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, s, err := soak(ctx, o, log)
	if err != nil {
		log.Error("soak run failed", "error", err, "dir", s.dir)
		os.Exit(2)
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(os.Stdout)
	}
	if !rep.Passed || o.keep {
		log.Info("run directory kept", "dir", s.dir, "daemon log", s.logPath)
	} else {
		_ = os.RemoveAll(s.dir)
	}
	if !rep.Passed {
		os.Exit(1)
	}
}

// run is the state the workers, the chaos and the sampling share.
type run struct {
	o   options
	s   setup
	log hclog.Logger
	rec *record
	// mcp is the HTTP client of every MCP session, over the MCP socket.
	mcp *http.Client

	next atomic.Int64 // the next iteration to start

	mu     sync.Mutex
	d      *daemon
	up     chan struct{} // closed while the daemon serves
	epoch  int           // bumped by each daemon kill
	events []Event
}

// Event is one SIGKILL and how the system came back from it.
type Event struct {
	Segment int     `json:"segment"`
	Target  string  `json:"target"`
	PID     int     `json:"pid"`
	AtExec  int     `json:"at_exec"`
	Back    float64 `json:"back_after_s"`
	Error   string  `json:"error,omitempty"`
}

func soak(ctx context.Context, o options, log hclog.Logger) (*Report, setup, error) {
	s, err := writeSetup(o)
	if err != nil {
		return nil, s, err
	}
	r := &run{o: o, s: s, log: log, rec: newRecord(), up: make(chan struct{}), mcp: endpoint.UnixClient(s.mcpSocket())}
	d, err := startDaemon(ctx, o, s, log)
	if err != nil {
		return nil, s, err
	}
	r.d = d
	close(r.up)
	defer func() {
		if d := r.daemon(); d != nil {
			select {
			case <-d.exited:
			default:
				d.kill(log)
			}
		}
	}()

	rep := &Report{N: o.n, Tenants: o.tenants, Concurrency: o.concurrency, Chaos: o.chaos, Bounds: o.bounds}
	first, err := takeSample(ctx, "start", 0, s, d)
	if err != nil {
		return nil, s, err
	}
	rep.Samples = append(rep.Samples, first)
	started := time.Now()
	for seg := range segments {
		from, to := seg*o.n/segments, (seg+1)*o.n/segments
		smp, err := r.segment(ctx, seg, from, to)
		if err != nil {
			return nil, s, err
		}
		rep.Samples = append(rep.Samples, smp)
		log.Info("segment done", "segment", seg+1, "executions", to, "ok", r.rec.ok, "failed", r.rec.failed,
			"daemon rss MiB", smp.DaemonRSS/1024, "fds", smp.DaemonFDs, "goroutines", smp.Goroutines)
	}
	rep.Seconds = time.Since(started).Seconds()
	rep.Events = r.events
	if err := r.verify(ctx, rep); err != nil {
		return nil, s, err
	}
	if err := r.daemon().stop(log); err != nil {
		rep.ShutdownError = err.Error()
	}
	rep.check(r.rec)
	return rep, s, ctx.Err()
}

func (r *run) daemon() *daemon {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d
}

// waitUp blocks while the daemon is down and returns the daemon's epoch.
func (r *run) waitUp(ctx context.Context) (int, error) {
	r.mu.Lock()
	up, epoch := r.up, r.epoch
	r.mu.Unlock()
	select {
	case <-up:
		return epoch, nil
	case <-ctx.Done():
		return epoch, ctx.Err()
	}
}

func (r *run) epochNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch
}

// segment runs iterations [from, to) with the chaos of seg halfway, then
// samples the quiescent daemon.
func (r *run) segment(ctx context.Context, seg, from, to int) (Sample, error) {
	r.next.Store(int64(from))
	segStart := time.Now()
	var wg sync.WaitGroup
	for range r.o.concurrency {
		wg.Go(func() { r.worker(ctx, to) })
	}
	target := chaosAt[seg]
	restarted := false
	if r.o.chaos && target != "" {
		wg.Go(func() {
			mid := int64(from + (to-from)/2)
			for r.next.Load() < mid && ctx.Err() == nil {
				time.Sleep(2 * time.Millisecond)
			}
			ev := r.kill(ctx, seg, target)
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		})
		restarted = target == "daemon"
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Sample{}, err
	}
	took := time.Since(segStart)
	lat := r.rec.takeLatency()
	// An agent that went quiet holds no connection; closed sessions and
	// returned sandboxes settle before the sample.
	r.mcp.CloseIdleConnections()
	time.Sleep(time.Second)
	smp, err := takeSample(ctx, fmt.Sprintf("%d%%", (seg+1)*100/segments), to, r.s, r.daemon())
	if err != nil {
		return smp, err
	}
	smp.Execs, smp.PerSec = to-from, float64(to-from)/took.Seconds()
	smp.P50MS, smp.P90MS, smp.P99MS = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99)
	smp.Restart = restarted
	if r.o.chaos {
		smp.Chaos = target
	}
	return smp, nil
}

// worker runs iterations until to, one MCP session per tenant it meets,
// renewed every -session-execs executions.
func (r *run) worker(ctx context.Context, to int) {
	sessions := map[string]*session{}
	defer func() {
		for _, s := range sessions {
			_ = s.c.Close()
		}
	}()
	for ctx.Err() == nil {
		i := int(r.next.Add(1) - 1)
		if i >= to {
			return
		}
		j := newJob(i, r.o.tenants)
		epoch, err := r.waitUp(ctx)
		if err != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		s := sessions[j.tenant]
		// A session of a killed daemon is gone with it; an agent opens a
		// new one, as it does after -session-execs executions.
		if s != nil && (s.uses >= r.o.sessionExecs || s.epoch != epoch) {
			_ = s.c.Close()
			s = nil
		}
		if s == nil {
			s, err = openSession(cctx, r.mcp, j.tenant)
			if err != nil {
				cancel()
				delete(sessions, j.tenant)
				r.noReply(j, err, epoch)
				r.pause(ctx)
				continue
			}
			s.epoch = epoch
			sessions[j.tenant] = s
			r.rec.opened(j.tenant)
		}
		start := time.Now()
		res, err := s.executeCode(cctx, j)
		took := time.Since(start)
		cancel()
		if err != nil {
			_ = s.c.Close()
			delete(sessions, j.tenant)
			r.noReply(j, err, epoch)
			r.pause(ctx)
			continue
		}
		r.rec.reply(j, res, took)
		if res.IsError {
			r.pause(ctx)
		}
	}
}

// noReply records a call without a reply; it is expected only when the
// daemon was killed since the call began.
func (r *run) noReply(j job, err error, epoch int) {
	killed := r.epochNow() != epoch
	if !killed {
		r.log.Warn("no reply", "execution", j.i, "tenant", j.tenant, "error", err)
	}
	r.rec.noReply(err, killed)
}

// pause is what an agent does after a failure: wait a moment before the
// next call, so a component that is restarting is not hammered.
func (r *run) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// kill SIGKILLs target and waits until the daemon reports it back.
func (r *run) kill(ctx context.Context, seg int, target string) Event {
	ev := Event{Segment: seg + 1, Target: target, AtExec: int(r.next.Load())}
	start := time.Now()
	var err error
	switch target {
	case "daemon":
		ev.PID, err = r.killDaemon(ctx)
	case "upstream":
		ev.PID, err = r.killUpstream(ctx)
	default:
		ev.PID, err = r.killPlugin(ctx, target[len("plugin "):])
	}
	ev.Back = time.Since(start).Seconds()
	if err != nil {
		ev.Error = err.Error()
		r.log.Error("chaos", "target", target, "error", err)
	} else {
		r.log.Info("chaos: killed and back", "target", target, "pid", ev.PID, "seconds", ev.Back)
	}
	return ev
}

func (r *run) killPlugin(ctx context.Context, kind string) (int, error) {
	d := r.daemon()
	pid, err := r.pluginPID(ctx, d, kind)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return pid, fmt.Errorf("kill %s plugin %d: %w", kind, pid, err)
	}
	return pid, poll(ctx, func() (bool, error) {
		ps, err := d.ctl.ListPlugins(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if p.GetKind() == kind && p.GetStatus() == "ok" && int(p.GetPid()) != pid && p.GetPid() > 0 {
				return true, nil
			}
		}
		return false, nil
	})
}

func (r *run) pluginPID(ctx context.Context, d *daemon, kind string) (int, error) {
	ps, err := d.ctl.ListPlugins(ctx)
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if p.GetKind() == kind && p.GetPid() > 0 {
			return int(p.GetPid()), nil
		}
	}
	return 0, fmt.Errorf("no running %s plugin", kind)
}

func (r *run) killUpstream(ctx context.Context) (int, error) {
	d := r.daemon()
	pid := 0
	servers, err := d.ctl.ListServers(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range servers {
		if s.GetName() == upstream {
			pid = int(s.GetPid())
		}
	}
	if pid <= 0 {
		return 0, fmt.Errorf("upstream %s has no pid", upstream)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return pid, fmt.Errorf("kill upstream %d: %w", pid, err)
	}
	return pid, poll(ctx, func() (bool, error) {
		servers, err := d.ctl.ListServers(ctx)
		if err != nil {
			return false, err
		}
		for _, s := range servers {
			if s.GetName() == upstream && s.GetState() == "ok" && int(s.GetPid()) != pid && s.GetPid() > 0 {
				return true, nil
			}
		}
		return false, nil
	})
}

// killDaemon holds new executions back, SIGKILLs cexecd with executions in
// flight and starts it again on the same data directory.
func (r *run) killDaemon(ctx context.Context) (int, error) {
	r.mu.Lock()
	d := r.d
	r.up = make(chan struct{})
	r.epoch++
	r.mu.Unlock()
	d.kill(r.log)
	nd, err := startDaemon(ctx, r.o, r.s, r.log)
	if err != nil {
		return d.pid(), fmt.Errorf("restart cexecd: %w", err)
	}
	r.mu.Lock()
	r.d = nd
	close(r.up)
	r.mu.Unlock()
	return d.pid(), nil
}

// poll calls done until it reports true, for at most two minutes.
func poll(ctx context.Context, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		ok, err := done()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("not back: %w", ctx.Err()), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
