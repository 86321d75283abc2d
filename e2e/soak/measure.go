package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sample is the daemon's footprint at one point of the run, taken while no
// execution is in flight and no MCP session is open.
type Sample struct {
	Label      string `json:"label"`
	Done       int    `json:"done"`
	DaemonPID  int    `json:"daemon_pid"`
	DaemonRSS  int64  `json:"daemon_rss_kib"`
	DaemonFDs  int    `json:"daemon_fds"`
	Goroutines int    `json:"goroutines"`
	// Plugins maps kind/name to the plugin process's RSS in KiB.
	Plugins map[string]int64 `json:"plugin_rss_kib"`
	// UpstreamRSS is server-everything's RSS in KiB.
	UpstreamRSS int64 `json:"upstream_rss_kib"`
	// Procs and ProcsRSS count every process below cexecd (plugins,
	// upstream, bubblewrap, zygotes), so leaked sandboxes show.
	Procs    int   `json:"procs"`
	ProcsRSS int64 `json:"procs_rss_kib"`
	// TenantBytes is the disk use (as du counts it) of each tenant's
	// data_dir/tenants/<tenant>.
	TenantBytes map[string]int64 `json:"tenant_bytes"`
	// Segment figures: the executions since the previous sample.
	Execs   int     `json:"execs"`
	PerSec  float64 `json:"execs_per_sec"`
	P50MS   float64 `json:"p50_ms"`
	P90MS   float64 `json:"p90_ms"`
	P99MS   float64 `json:"p99_ms"`
	Chaos   string  `json:"chaos,omitempty"`
	Restart bool    `json:"after_daemon_restart,omitempty"`
}

// takeSample measures d; the caller has stopped the load and closed the
// MCP sessions.
func takeSample(ctx context.Context, label string, done int, s setup, d *daemon) (Sample, error) {
	smp := Sample{Label: label, Done: done, DaemonPID: d.pid(), Plugins: map[string]int64{}, TenantBytes: map[string]int64{}}
	st, err := d.ctl.Status(ctx)
	if err != nil {
		return smp, fmt.Errorf("sample %s: %w", label, err)
	}
	smp.Goroutines = int(st.GetGoroutines())
	smp.DaemonRSS = rssKiB(d.pid())
	smp.DaemonFDs = fdCount(d.pid())
	plugins, err := d.ctl.ListPlugins(ctx)
	if err != nil {
		return smp, fmt.Errorf("sample %s: %w", label, err)
	}
	for _, p := range plugins {
		smp.Plugins[p.GetKind()+"/"+p.GetName()] = rssKiB(int(p.GetPid()))
	}
	servers, err := d.ctl.ListServers(ctx)
	if err != nil {
		return smp, fmt.Errorf("sample %s: %w", label, err)
	}
	for _, sv := range servers {
		if sv.GetName() == upstream {
			smp.UpstreamRSS = rssKiB(int(sv.GetPid()))
		}
	}
	for _, p := range descendants(d.pid()) {
		smp.Procs++
		smp.ProcsRSS += rssKiB(p.pid)
	}
	entries, err := os.ReadDir(filepath.Join(s.dataDir, "tenants"))
	if err != nil {
		return smp, fmt.Errorf("sample %s: tenants: %w", label, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "soak-") {
			smp.TenantBytes[e.Name()] = diskUse(filepath.Join(s.dataDir, "tenants", e.Name()))
		}
	}
	return smp, nil
}

// rssKiB is VmRSS from /proc/<pid>/status; 0 when the process is gone.
func rssKiB(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func fdCount(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// diskUse sums allocated blocks, as du does.
func diskUse(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	d := sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
	return float64(d.Microseconds()) / 1000
}

func sumValues(m map[string]int64) (sum, maxV int64) {
	for _, v := range m {
		sum += v
		maxV = max(maxV, v)
	}
	return sum, maxV
}
