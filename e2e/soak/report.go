package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
)

// Report is the run's outcome: the samples, the kills, the failures by
// kind and every check with whether it held.
type Report struct {
	N           int     `json:"n"`
	Tenants     int     `json:"tenants"`
	Concurrency int     `json:"concurrency"`
	Chaos       bool    `json:"chaos"`
	Seconds     float64 `json:"seconds"`
	OK          int     `json:"ok"`
	Failed      int     `json:"failed"`
	// Acked counts state writes acknowledged; Lost those missing or
	// wrong when read back through the daemon at the end.
	Acked        int            `json:"acked_writes"`
	Lost         int            `json:"lost_writes"`
	LostExamples []string       `json:"lost_examples,omitempty"`
	RawPII       int            `json:"raw_pii"`
	RawExamples  []string       `json:"raw_pii_examples,omitempty"`
	Untokenized  int            `json:"untokenized"`
	Errors       map[string]int `json:"errors"`
	Unclear      map[string]int `json:"unclear_errors"`
	// Dropped are calls cut by the daemon's SIGKILL (the client saw the
	// connection go); Unexpected are calls without a reply at other times.
	Dropped       map[string]int `json:"dropped_by_daemon_kill"`
	Unexpected    map[string]int `json:"unexpected_no_reply"`
	ShutdownError string         `json:"shutdown_error,omitempty"`
	Samples       []Sample       `json:"samples"`
	Events        []Event        `json:"events"`
	Bounds        bounds         `json:"bounds"`
	Checks        []Check        `json:"checks"`
	Passed        bool           `json:"passed"`
}

// Check is one claim of the run and whether it held.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// verify reads back every acknowledged state write through the daemon.
func (r *run) verify(ctx context.Context, rep *Report) error {
	ctl := r.daemon().ctl
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.o.concurrency)
	var firstErr error
	for tenant, acked := range r.rec.acked {
		names := map[string]bool{}
		states, err := ctl.ListState(ctx, tenant)
		if err != nil {
			return fmt.Errorf("read back %s's state: %w", tenant, err)
		}
		for _, s := range states {
			names[s.GetName()] = true
		}
		for _, i := range acked {
			j := newJob(i, r.o.tenants)
			rep.Acked++
			lost := func(why string) {
				mu.Lock()
				defer mu.Unlock()
				rep.Lost++
				if len(rep.LostExamples) < 10 {
					rep.LostExamples = append(rep.LostExamples, fmt.Sprintf("%s %s: %s", tenant, j.key, why))
				}
			}
			if !names[j.key] {
				lost("not listed")
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				b, err := ctl.GetStateJSON(ctx, tenant, j.key)
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					lost(err.Error())
					return
				}
				var v struct {
					I      int    `json:"i"`
					Tenant string `json:"tenant"`
				}
				if err := json.Unmarshal(b, &v); err != nil || v.I != j.i || v.Tenant != tenant {
					lost(fmt.Sprintf("holds %.100s", b))
				}
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		r.log.Warn("reading state back failed", "error", firstErr)
	}
	return nil
}

// check fills in the counts and decides every check.
func (rep *Report) check(rec *record) {
	rep.OK, rep.Failed = rec.ok, rec.failed
	rep.RawPII, rep.RawExamples, rep.Untokenized = rec.rawPII, rec.rawExamples, rec.untokenized
	rep.Errors, rep.Unclear, rep.Dropped, rep.Unexpected = rec.errors, rec.unclear, rec.dropped, rec.unexpected
	add := func(name string, ok bool, format string, args ...any) {
		rep.Checks = append(rep.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	add("executions succeeded", rep.OK > 0 && rep.OK+rep.Failed == rep.N, "%d ok, %d failed of %d", rep.OK, rep.Failed, rep.N)
	if !rep.Chaos {
		add("no failure without chaos", rep.Failed == 0, "%d failed", rep.Failed)
	}
	add("no acknowledged state write lost", rep.Lost == 0 && rep.Acked == rep.OK, "%d of %d acknowledged writes lost", rep.Lost, rep.Acked)
	add("no raw PII in model-facing output", rep.RawPII == 0, "%d replies with raw PII", rep.RawPII)
	add("PII came back tokenized", rep.Untokenized == 0, "%d ok replies without [EMAIL_n] and [PHONE_n]", rep.Untokenized)
	add("every failure a clear error", len(rep.Unclear) == 0, "%d unclear kinds", len(rep.Unclear))
	add("no call without a reply but while the daemon was killed", len(rep.Unexpected) == 0, "%d kinds", len(rep.Unexpected))
	for _, ev := range rep.Events {
		add("back after SIGKILL of "+ev.Target, ev.Error == "", "%.1fs %s", ev.Back, ev.Error)
	}
	add("clean shutdown at the end", rep.ShutdownError == "", "%s", cmp.Or(rep.ShutdownError, "SIGTERM, exit 0"))

	// Each daemon process from its first sample after a segment to its
	// last: the first daemon from the warm baseline (10%) to the sample
	// before its kill, the restarted one from its first sample to the end.
	b := rep.Bounds
	runs := map[int][]Sample{}
	var pids []int
	for _, s := range rep.Samples[1:] {
		if _, ok := runs[s.DaemonPID]; !ok {
			pids = append(pids, s.DaemonPID)
		}
		runs[s.DaemonPID] = append(runs[s.DaemonPID], s)
	}
	for _, pid := range pids {
		ss := runs[pid]
		if len(ss) < 2 {
			continue
		}
		base, last := ss[0], ss[len(ss)-1]
		span := fmt.Sprintf(" (pid %d, %s → %s)", pid, base.Label, last.Label)
		add("daemon RSS"+span, last.DaemonRSS <= base.DaemonRSS+b.RSSGrowthMiB*1024,
			"%.1f → %.1f MiB, bound +%d MiB", mib(base.DaemonRSS), mib(last.DaemonRSS), b.RSSGrowthMiB)
		add("daemon descriptors"+span, last.DaemonFDs <= base.DaemonFDs+b.FDSlack,
			"%d → %d, bound +%d", base.DaemonFDs, last.DaemonFDs, b.FDSlack)
		add("daemon goroutines"+span, last.Goroutines <= base.Goroutines+b.GoroutineSlack,
			"%d → %d, bound +%d", base.Goroutines, last.Goroutines, b.GoroutineSlack)
		// A restarted daemon's first sample may come while it still warms
		// its pools: its processes are held to the first daemon's warm
		// count, which a leak would pass.
		procBase := runs[pids[0]][0].Procs
		add("processes below cexecd"+span, last.Procs <= procBase+b.ProcSlack,
			"%d → %d (warm baseline %d), bound +%d", base.Procs, last.Procs, procBase, b.ProcSlack)
	}
	first, end := rep.Samples[0], rep.Samples[len(rep.Samples)-1]
	execs := map[string]int{}
	for i := range rep.N {
		execs[tenantID(i%rep.Tenants)]++
	}
	worst, over := "", int64(-1)<<62
	var worstGrowth, worstLimit int64
	for t, v := range end.TenantBytes {
		g := v - first.TenantBytes[t]
		limit := (int64(execs[t])*b.TenantKiBPerExec + int64(rec.sessions[t])*b.TenantKiBPerSession) * 1024
		if g-limit > over {
			worst, over, worstGrowth, worstLimit = t, g-limit, g, limit
		}
	}
	add("tenant data", over <= 0, "closest to its bound %s: grew %.2f MiB in %d executions and %d sessions (%.1f KiB per execution); bound %.2f MiB (%d KiB per execution + %d KiB per session)",
		worst, mib(worstGrowth/1024), execs[worst], rec.sessions[worst], float64(worstGrowth)/1024/float64(max(1, execs[worst])),
		mib(worstLimit/1024), b.TenantKiBPerExec, b.TenantKiBPerSession)
	rep.Passed = true
	for _, c := range rep.Checks {
		rep.Passed = rep.Passed && c.OK
	}
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// print writes the figures table, the kills, the failures and the checks.
func (rep *Report) print(w io.Writer) {
	fmt.Fprintf(w, "soak: %d executions across %d tenants, concurrency %d, chaos %v, %.0f s\n\n",
		rep.N, rep.Tenants, rep.Concurrency, rep.Chaos, rep.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(Sample) string) {
		cells := []string{name}
		for _, s := range rep.Samples {
			cells = append(cells, f(s))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row("", func(s Sample) string { return s.Label })
	row("executions done", func(s Sample) string { return fmt.Sprint(s.Done) })
	row("SIGKILL in segment", func(s Sample) string { return cmp.Or(strings.TrimPrefix(s.Chaos, "plugin "), "-") })
	row("daemon pid", func(s Sample) string { return fmt.Sprint(s.DaemonPID) })
	row("daemon RSS MiB", func(s Sample) string { return fmt.Sprintf("%.1f", mib(s.DaemonRSS)) })
	row("daemon fds", func(s Sample) string { return fmt.Sprint(s.DaemonFDs) })
	row("daemon goroutines", func(s Sample) string { return fmt.Sprint(s.Goroutines) })
	for _, p := range slices.Sorted(maps.Keys(rep.Samples[0].Plugins)) {
		row(p+" RSS MiB", func(s Sample) string { return fmt.Sprintf("%.1f", mib(s.Plugins[p])) })
	}
	row("upstream RSS MiB", func(s Sample) string { return fmt.Sprintf("%.1f", mib(s.UpstreamRSS)) })
	row("procs below cexecd", func(s Sample) string { return fmt.Sprint(s.Procs) })
	row("  their RSS MiB", func(s Sample) string { return fmt.Sprintf("%.0f", mib(s.ProcsRSS)) })
	row("tenant data MiB (all)", func(s Sample) string {
		sum, _ := sumValues(s.TenantBytes)
		return fmt.Sprintf("%.2f", mib(sum/1024))
	})
	row("tenant data KiB (max)", func(s Sample) string {
		_, m := sumValues(s.TenantBytes)
		return fmt.Sprint(m / 1024)
	})
	row("execs/s (segment)", func(s Sample) string { return fmt.Sprintf("%.1f", s.PerSec) })
	row("p50 ms", func(s Sample) string { return fmt.Sprintf("%.1f", s.P50MS) })
	row("p90 ms", func(s Sample) string { return fmt.Sprintf("%.1f", s.P90MS) })
	row("p99 ms", func(s Sample) string { return fmt.Sprintf("%.1f", s.P99MS) })
	_ = tw.Flush()

	if len(rep.Events) > 0 {
		fmt.Fprintln(w, "\nSIGKILLs:")
		for _, ev := range rep.Events {
			fmt.Fprintf(w, "  segment %d, after %d started: %s (pid %d), back in %.1f s %s\n", ev.Segment, ev.AtExec, ev.Target, ev.PID, ev.Back, ev.Error)
		}
	}
	fmt.Fprintf(w, "\nexecutions: %d ok, %d failed; %d state writes acknowledged, %d lost\n", rep.OK, rep.Failed, rep.Acked, rep.Lost)
	counts := func(title string, m map[string]int) {
		if len(m) == 0 {
			return
		}
		fmt.Fprintln(w, title)
		keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
		for _, k := range keys {
			fmt.Fprintf(w, "  %6d  %s\n", m[k], k)
		}
	}
	counts("failures the model saw, by kind:", rep.Errors)
	counts("UNCLEAR failures:", rep.Unclear)
	counts("calls cut by the daemon's SIGKILL (client side):", rep.Dropped)
	counts("UNEXPECTED calls without a reply:", rep.Unexpected)
	for _, e := range rep.RawExamples {
		fmt.Fprintln(w, "RAW PII:", e)
	}
	for _, e := range rep.LostExamples {
		fmt.Fprintln(w, "LOST:", e)
	}
	fmt.Fprintln(w, "\nchecks:")
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	if rep.Passed {
		fmt.Fprintln(w, "\nPASS")
	} else {
		fmt.Fprintln(w, "\nFAIL")
	}
}
