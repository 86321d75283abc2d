package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/core/mcpface/mcpclient"
)

// MCPResult is the output of `cexecctl bench mcp --json`: execute_code
// latency over streamable HTTP as an agent sees it, in milliseconds.
type MCPResult struct {
	// Endpoint is the MCP socket (or URL) measured.
	Endpoint string  `json:"endpoint"`
	Code     string  `json:"code"`
	Tenant   string  `json:"tenant,omitempty"`
	N        int     `json:"n"`
	Warmup   int     `json:"warmup"`
	MinMs    float64 `json:"min_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	MeanMs   float64 `json:"mean_ms"`
}

type mcpFlags struct {
	url, token, tenant, code string
	n, warmup                int
	timeout                  time.Duration
}

func mcpBench(env *cli.Env) *cobra.Command {
	var f mcpFlags
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Time execute_code over the running daemon's MCP face (streamable HTTP)",
		Long: "Opens one MCP session on the daemon's MCP socket (next to its control socket, see\n" +
			"--address) or on --url, runs --warmup unmeasured execute_code calls, then --n measured\n" +
			"ones, checking each result. The default program is print(1+1); the target is p50 <= 5 ms.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.n < 1 || f.warmup < 1 {
				return cli.UsageErrorf("--n and --warmup must be at least 1")
			}
			if f.token == "" {
				f.token = os.Getenv(mcpclient.TokenEnv)
			}
			if f.tenant == "" {
				f.tenant = os.Getenv(mcpclient.TenantEnv)
			}
			o := mcpclient.BenchOptions{URL: f.url, Token: f.token, Tenant: f.tenant, Code: f.code, N: f.n, Warmup: f.warmup}
			endpoint := f.url
			if f.url == "" {
				addr := env.Address
				if addr == "" {
					addr = client.DefaultAddress()
				}
				endpoint = mcpclient.SocketPath(client.SocketPath(addr))
				if _, err := os.Stat(endpoint); errors.Is(err, fs.ErrNotExist) {
					return &cli.ExitError{Code: cli.ExitNotRunning, Err: fmt.Errorf("no MCP socket at %s: is cexecd running there (see --address)?", endpoint)}
				}
				o.URL = mcpclient.UnixBaseURL + mcpclient.EndpointPath
				o.HTTPClient = mcpclient.UnixClient(endpoint)
			}
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			r, err := mcpclient.BenchExecute(ctx, o)
			if err != nil {
				return err
			}
			code := f.code
			if code == "" {
				code = "print(1+1)"
			}
			res := MCPResult{Endpoint: endpoint, Code: code, Tenant: f.tenant, N: r.N, Warmup: f.warmup,
				MinMs: ms(r.Min), P50Ms: ms(r.P50), P90Ms: ms(r.P90), P99Ms: ms(r.P99), MaxMs: ms(r.Max), MeanMs: ms(r.Mean)}
			if env.JSON {
				return env.PrintJSON(res)
			}
			fmt.Fprintf(env.Stdout, "execute_code %q over MCP (%s), %d calls: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, min %.2f ms, max %.2f ms\n",
				code, endpoint, res.N, res.P50Ms, res.P90Ms, res.P99Ms, res.MinMs, res.MaxMs)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "streamable HTTP endpoint instead of the MCP socket, e.g. http://127.0.0.1:7797/mcp")
	fl.StringVar(&f.token, "token", "", "bearer token for --url (default $"+mcpclient.TokenEnv+")")
	fl.StringVar(&f.tenant, "tenant", "", "tenant on the MCP socket (default $"+mcpclient.TenantEnv+", else the daemon's default)")
	fl.StringVar(&f.code, "code", "", "program to run (default print(1+1), whose output is checked)")
	fl.IntVar(&f.n, "n", 200, "measured calls")
	fl.IntVar(&f.warmup, "warmup", 10, "unmeasured calls first")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long")
	return cmd
}

