// Package tenants is `cexecctl tenants`: list tenants with their disk use
// and activity, and remove inactive ones.
package tenants

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/bytesize"
)

// DefaultGCAge is how long a tenant must have been unused before gc
// removes it, unless --older-than says otherwise.
const DefaultGCAge = 720 * time.Hour

// Command returns the tenants command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "tenants",
		Short: "List tenants and remove inactive ones",
	})
	cmd.AddCommand(ls(env), gc(env))
	return cmd
}

func ls(env *cli.Env) *cobra.Command {
	cmd := cli.List(env, "List tenants: ID DECLARED DISK QUOTA MAX-FILES MODE RUNNING SESSIONS LAST-USED", func(ctx context.Context, c *client.Client) error {
		ts, err := c.ListTenants(ctx)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListTenantsResponse{Tenants: ts})
		}
		return writeTable(env.Stdout, ts)
	})
	cmd.Long = `List the tenants declared in cexec.hcl and those with a workspace. Declared
tenants and the default tenant are never removed by gc; a declared tenant that never ran shows "-"
as its last use. DISK counts everything a tenant stores (workspace, state,
skills, session logs, PII vaults) in image mode, the workspace when
measured; QUOTA and MAX-FILES are the tenant's limits ("-": none). MODE
says how the disk quota holds: "image" (the tenant's own file system of
that size: writes past it fail) or "measured" (measured after executions;
cexecd could not mount images).`
	return cmd
}

// writeTable is the text of tenants ls. The API reports no count of the
// files in use, only max_files, so its column is named for the limit.
func writeTable(w io.Writer, ts []*cexecv1.TenantInfo) error {
	t := cli.NewTable(w, "ID", "DECLARED", "DISK", "QUOTA", "MAX-FILES", "MODE", "RUNNING", "SESSIONS", "LAST-USED")
	for _, tn := range ts {
		quota, files := "-", "-"
		if tn.GetDiskQuota() > 0 {
			quota = bytesize.Format(tn.GetDiskQuota())
		}
		if tn.GetMaxFiles() > 0 {
			files = strconv.FormatInt(tn.GetMaxFiles(), 10)
		}
		t.Row(tn.GetId(), cli.YesNo(tn.GetDeclared()), bytesize.Format(tn.GetDiskBytes()), quota, files, tn.GetDiskMode(),
			tn.GetRunning(), tn.GetSessions(), cli.UnixMs(tn.GetLastUsedUnixMs()))
	}
	return t.Flush()
}

func gc(env *cli.Env) *cobra.Command {
	var (
		olderThan time.Duration
		dryRun    bool
	)
	cmd := &cobra.Command{
		Use:   "gc [--older-than 720h] [--dry-run]",
		Short: "Remove tenants unused for longer than --older-than: workspace, state, skills and sessions",
		Long: `Remove every tenant that has been unused (no execution, no state, skill or
session write) for longer than --older-than, with its workspace, state,
skills and session logs. Tenants declared in cexec.hcl, the default tenant
and tenants with an execution running are kept. --dry-run only lists what would go.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan <= 0 {
				return cli.UsageErrorf("--older-than must be positive, got %s", olderThan)
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				removed, err := c.GCTenants(cmd.Context(), olderThan, dryRun)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(gcJSON{DryRun: dryRun, OlderThan: olderThan.String(), Removed: removedJSON(removed)})
				}
				verb := "removed"
				if dryRun {
					verb = "would remove"
				}
				if len(removed) == 0 {
					_, err := fmt.Fprintf(env.Stdout, "no tenant unused for more than %s\n", olderThan)
					return err
				}
				for _, t := range removed {
					fmt.Fprintf(env.Stdout, "%s %s (%s, last used %s)\n", verb, t.GetId(), bytesize.Format(t.GetDiskBytes()), cli.UnixMs(t.GetLastUsedUnixMs()))
				}
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", DefaultGCAge, "remove tenants unused for longer than this")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only list the tenants that would be removed")
	return cmd
}

// gcJSON is gc's --json output.
type gcJSON struct {
	DryRun    bool          `json:"dry_run"`
	OlderThan string        `json:"older_than"`
	Removed   []removedInfo `json:"removed"`
}

type removedInfo struct {
	ID         string `json:"id"`
	DiskBytes  int64  `json:"disk_bytes"`
	LastUsedMs int64  `json:"last_used_unix_ms"`
}

func removedJSON(ts []*cexecv1.TenantInfo) []removedInfo {
	out := make([]removedInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, removedInfo{ID: t.GetId(), DiskBytes: t.GetDiskBytes(), LastUsedMs: t.GetLastUsedUnixMs()})
	}
	return out
}
