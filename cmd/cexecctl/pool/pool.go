// Package pool is `cexecctl pool`: the daemon's warm sandbox pool, per
// tenant and per sandbox.
package pool

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// Command returns the pool command.
func Command(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "pool",
		Short: "Show the warm sandbox pool: sandboxes per tenant, busy ones, limits and memory",
		Long: `Show the daemon's sandbox pool.

The pool keeps warm sandboxes per tenant, never shared between tenants:
"warm" idle ones beyond the tenant's busy ones, or as many as the tenant's
peak of concurrent executions in the last idle_timeout when that is more
(TARGET). All tenants together have at most max_total sandboxes. RSS is the
resident memory the sandbox backend reports for each sandbox (bwrap: the
proportional set size of all its processes).`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.PoolStatus(cmd.Context())
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(r)
				}
				return render(env.Stdout, r, time.Now())
			})
		},
	}
}

func render(w io.Writer, r *cexecv1.PoolStatusResponse, now time.Time) error {
	idle := 0
	for _, n := range r.GetIdle() {
		idle += int(n)
	}
	fmt.Fprintf(w, "backend    %s\n", r.GetBackend())
	fmt.Fprintf(w, "sandboxes  %d of %d: %d idle, %d busy, %d creating\n",
		idle+int(r.GetBusy())+int(r.GetCreating()), r.GetMaxTotal(), idle, r.GetBusy(), r.GetCreating())
	fmt.Fprintf(w, "warm       %d idle per active tenant, more after bursts of concurrent executions\n", r.GetWarm())

	busy := map[string]int{}
	tenants := map[string]bool{}
	for _, s := range r.GetSandboxes() {
		tenants[s.GetTenant()] = true
		if s.GetState() == "busy" {
			busy[s.GetTenant()]++
		}
	}
	for t := range r.GetIdle() {
		tenants[t] = true
	}
	for t := range r.GetTargets() {
		tenants[t] = true
	}
	if len(tenants) == 0 {
		return nil
	}
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	slices.Sort(names)
	fmt.Fprintln(w)
	tt := cli.NewTable(w, "TENANT", "IDLE", "BUSY", "TARGET")
	for _, t := range names {
		target := "-"
		if n, ok := r.GetTargets()[t]; ok {
			target = fmt.Sprint(n)
		}
		tt.Row(t, r.GetIdle()[t], busy[t], target)
	}
	if err := tt.Flush(); err != nil {
		return err
	}
	if len(r.GetSandboxes()) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	st := cli.NewTable(w, "SANDBOX", "TENANT", "STATE", "USES", "RSS", "LAST USED")
	for _, s := range r.GetSandboxes() {
		state := s.GetState()
		if s.GetFresh() {
			state += " (fresh)"
		}
		st.Row(s.GetId(), s.GetTenant(), state, s.GetUses(), mib(s.GetRssBytes()), ago(s.GetLastUsedUnixMs(), now))
	}
	return st.Flush()
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func ago(unixMs int64, now time.Time) string {
	if unixMs <= 0 {
		return "-"
	}
	return now.Sub(time.UnixMilli(unixMs)).Round(time.Second).String() + " ago"
}
