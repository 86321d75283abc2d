package bench

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client/tokenbench"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

type tokensFlags struct {
	cexecd, pluginDir, peers, catalogPeer, catalogTools string
	small                                               bool
}

func tokensBench(env *cli.Env) *cobra.Command {
	var f tokensFlags
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Count what a model reads per task: direct tool calling against code mode through cexec",
		Long: `Scripted ideal agents do six tasks against the real MCP reference servers
(filesystem, memory, everything) and a catalog peer serving the 527
livemcpbench tool definitions, both ways:

  direct  every tool definition of every connected server, every call and
          every result in the model's context
  code    cexec's tools/list, the search_tools (and list_tools) calls, the
          programs or call_tool calls and the daemon's real replies

Tokens are counted with o200k_base and cl100k_base (offline); turns are the
model's messages. A private cexecd (bwrap, the embeddings selector, the PII
guard) is started on a temporary socket.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			if !env.JSON {
				o.Progress = func(format string, args ...any) { fmt.Fprintf(env.Stderr, format+"\n", args...) }
			}
			rep, err := tokenbench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if env.JSON {
				return env.PrintJSON(rep)
			}
			_, err = env.Stdout.Write([]byte(rep.Table()))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cexecd, "cexecd", "", "cexecd binary (default: next to cexecctl, else from PATH)")
	fl.StringVar(&f.pluginDir, "plugin-dir", "", "plugin_dir of the private daemon (default: the directory of cexecd)")
	fl.StringVar(&f.peers, "peers", "", "directory of the reference servers' launchers (default: test/peers/node_modules/.bin of the repository)")
	fl.StringVar(&f.catalogPeer, "catalog-peer", "", "catalog peer binary (default: catalogpeer next to cexecd)")
	fl.StringVar(&f.catalogTools, "catalog-tools", "", "tools.jsonl the catalog peer serves (default: ../shared/eval/livemcpbench/tools.jsonl from the repository)")
	fl.BoolVar(&f.small, "small", false, "small data (20 notes, 500 CSV rows, 50 entities), for a quick check")
	return cmd
}

func (f tokensFlags) options() (tokenbench.Options, error) {
	o := tokenbench.Options{Scale: tokenbench.FullScale}
	if f.small {
		o.Scale = tokenbench.SmallScale
	}
	var err error
	if o.Cexecd, err = findCexecd(f.cexecd); err != nil {
		return o, err
	}
	o.PluginDir = f.pluginDir
	if o.PluginDir == "" {
		o.PluginDir = filepath.Dir(o.Cexecd)
	}
	o.CatalogPeer = f.catalogPeer
	if o.CatalogPeer == "" {
		o.CatalogPeer = filepath.Join(filepath.Dir(o.Cexecd), "catalogpeer")
	}
	o.Peers = f.peers
	if o.Peers == "" {
		p, ok := upwards(filepath.Join("test", "peers", "node_modules", ".bin"))
		if !ok {
			return o, cli.UsageErrorf("no test/peers/node_modules/.bin found from here; pass --peers (or run `make deps` in the repository)")
		}
		o.Peers = p
	}
	o.CatalogTools = f.catalogTools
	if o.CatalogTools == "" {
		p, ok := upwards(filepath.Join("..", "shared", "eval", "livemcpbench", "tools.jsonl"))
		if !ok {
			return o, cli.UsageErrorf("no ../shared/eval/livemcpbench/tools.jsonl found from here; pass --catalog-tools")
		}
		o.CatalogTools = p
	}
	for _, p := range []*string{&o.PluginDir, &o.CatalogPeer, &o.Peers, &o.CatalogTools} {
		if *p, err = filepath.Abs(*p); err != nil {
			return o, err
		}
	}
	return o, nil
}
