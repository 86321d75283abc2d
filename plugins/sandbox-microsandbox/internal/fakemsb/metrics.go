package main

import (
	"fmt"
	"time"

	"github.com/cexec/cexec/plugins/sandbox-microsandbox/internal/proctree"
)

// metrics is `msb metrics`: a sandbox's memory is the resident size of
// what its exec sessions run.
func metrics(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--format": "format", "--interval": "interval", "--sort": "sort"},
		map[string]string{"--all": "all", "-a": "all"})
	if f == nil {
		return unknownFlag("metrics", bad, "msb metrics [OPTIONS] [NAME]")
	}
	var reports []map[string]any
	for _, r := range all() {
		if r.Status != "Running" || len(f.pos) == 1 && r.Name != f.pos[0] {
			continue
		}
		var pids []int
		for _, e := range r.Execs {
			pids = append(append(pids, e), proctree.Descendants(e)...)
		}
		reports = append(reports, map[string]any{"name": r.Name, "state": "running", "cpus": r.CPUs,
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "cpu_percent": 0.0, "vcpu_time_ns": 0,
			"memory_bytes": rss(pids), "memory_available_bytes": int64(r.MemoryMiB) << 20, "memory_host_resident_bytes": rss(pids),
			"memory_limit_bytes": int64(r.MemoryMiB) << 20, "disk_read_bytes": 0, "disk_write_bytes": 0, "net_rx_bytes": 0,
			"net_tx_bytes": 0, "upper_used_bytes": 0, "upper_free_bytes": 0, "upper_host_allocated_bytes": 0,
			"uptime_secs": time.Since(r.CreatedAt).Seconds()})
	}
	if len(f.pos) == 1 {
		if len(reports) == 0 {
			return fail(fmt.Sprintf("no metrics recorded for sandbox %q", f.pos[0]))
		}
		if f.last("format") == "json" {
			return printJSON(reports[0])
		}
	}
	if f.last("format") == "json" {
		if reports == nil {
			reports = []map[string]any{}
		}
		return printJSON(reports)
	}
	for _, r := range reports {
		fmt.Printf("%s\t%v\n", r["name"], r["memory_bytes"])
	}
	return 0
}
