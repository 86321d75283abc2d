package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

// list is `msb list`, as a table or as msb 0.7.2's JSON.
func list(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--format": "format", "--label": "label"},
		map[string]string{"--running": "running", "--stopped": "stopped", "--quiet": "quiet", "-q": "quiet"})
	if f == nil {
		return unknownFlag("list", bad, "msb list [OPTIONS]")
	}
	if v := f.last("format"); v != "" && v != "json" {
		return usageError(fmt.Sprintf("error: invalid value '%s' for '--format <FORMAT>'\n  [possible values: json]", v), "msb list [OPTIONS]")
	}
	var rows []*record
	for _, r := range all() {
		if !hasLabels(r, f.values["label"]) || f.bools["running"] && r.Status != "Running" || f.bools["stopped"] && r.Status != "Stopped" {
			continue
		}
		rows = append(rows, r)
	}
	if f.last("format") == "json" {
		out := []map[string]any{}
		for _, r := range rows {
			out = append(out, map[string]any{"name": r.Name, "status": r.Status, "created_at": jsonTime(r.CreatedAt), "image": r.Image})
		}
		return printJSON(out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "No sandboxes found.")
		return 0
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if f.bools["quiet"] {
		for _, r := range rows {
			fmt.Fprintln(w, r.Name)
		}
		return 0
	}
	fmt.Fprintf(w, "%-40s %-24s %-10s %s\n", "NAME", "IMAGE", "STATUS", "CREATED")
	for _, r := range rows {
		fmt.Fprintf(w, "%-40s %-24s %-10s %s\n", r.Name, r.Image, r.Status, r.CreatedAt.Format(time.RFC3339))
	}
	return 0
}
