package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
)

// settle waits until the pool holds the tenant's target of sandboxes and
// creates none, so that measurements do not compete with warming. It
// returns the tenant: the given one, else the owner of the samples'
// sandboxes (the daemon's default when none was named).
func settle(ctx context.Context, c *client.Client, tenant string, ss []sample, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := c.PoolStatus(ctx)
		if err != nil {
			return "", err
		}
		have := 0
		for _, sb := range st.GetSandboxes() {
			for _, s := range ss {
				if tenant == "" && s.sandbox == sb.GetId() {
					tenant = sb.GetTenant()
				}
			}
			if sb.GetTenant() == tenant && !sb.GetFresh() {
				have++
			}
		}
		if st.GetCreating() == 0 && have >= int(st.GetTargets()[tenant]) || time.Now().After(deadline) {
			return tenant, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quiesce waits, at most limit, until the process tree of the daemon (pid
// root: its plugins, sandboxes and upstream servers) used less than 5% of
// a CPU over 100 ms. It returns how long it waited and whether the tree
// fell quiet (false: it gave up at limit). Without the daemon's processes
// in sight (another machine, another pid namespace) it does not wait.
func quiesce(ctx context.Context, root int, limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	if root <= 0 {
		return 0, true, nil
	}
	const window = 100 * time.Millisecond
	prev, ok := treeCPUMs(root)
	for ok && time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(window):
		}
		cur, found := treeCPUMs(root)
		if !found || cur-prev < 0.05*ms(window) {
			return time.Since(start), true, nil
		}
		prev = cur
	}
	return time.Since(start), !ok, nil
}

// treeCPUMs is the CPU time, in milliseconds, of process root and its
// descendants, including the children they have waited for; false when
// root cannot be read. A descendant reaped while the tree is read (after
// its parent's figure, before its own) would drop out of the sum, which
// could then be lower than an earlier one: such a reading is taken again.
func treeCPUMs(root int) (float64, bool) {
	for range 5 {
		total, rootOK, complete := readTreeCPUMs(root)
		if !rootOK {
			return 0, false
		}
		if complete {
			return total, true
		}
	}
	return 0, false
}

// readTreeCPUMs reads the tree once; complete is false when a process
// listed as a child could no longer be read.
func readTreeCPUMs(root int) (total float64, rootOK, complete bool) {
	complete = true
	seen := map[int]bool{}
	var walk func(pid int) bool
	walk = func(pid int) bool {
		if seen[pid] {
			return true
		}
		seen[pid] = true
		cpu, err := statMs(pid, 4)
		if err != nil {
			return false
		}
		total += cpu
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
			for _, k := range strings.Fields(string(kids)) {
				if n, err := strconv.Atoi(k); err == nil && !walk(n) {
					complete = false
				}
			}
		}
		return true
	}
	rootOK = walk(root)
	return total, rootOK, complete
}

// awaitServers waits, at most limit, until no upstream server is still
// connecting, and returns how long it waited.
func awaitServers(ctx context.Context, c *client.Client, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		servers, err := c.ListServers(ctx)
		if err != nil {
			return 0, err
		}
		connecting := slices.ContainsFunc(servers, func(s *cexecv1.ServerInfo) bool {
			return s.GetState() == "connecting" // core/control.ServerConnecting
		})
		if !connecting || time.Since(start) > limit {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
