// Package tools is `cexecctl tools`: the tool catalog (list, show a stub,
// refresh) and tool search, as sandboxed code and agents see them.
package tools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/cmd/cexecctl/servers"
)

// Command returns the tools command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "tools",
		Short: "List, show, refresh and search the tools of the upstream servers",
	})
	srv := servers.Ls(env)
	srv.Use, srv.Aliases = "servers", nil
	cmd.AddCommand(ls(env), show(env), refresh(env), searchCmd(env), srv)
	return cmd
}

func ls(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:     "ls [SERVER]",
		Aliases: []string{"list"},
		Short:   "List tools (of one server): TOOL DESCRIPTION",
		Args:    cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				ts, err := c.ListTools(cmd.Context(), serverArg(args))
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(&cexecv1.ListToolsResponse{Tools: ts})
				}
				if len(ts) == 0 {
					fmt.Fprintln(env.Stdout, "no tools (see `cexecctl servers ls` for the servers' states)")
					return nil
				}
				t := cli.NewTable(env.Stdout, "TOOL", "DESCRIPTION")
				for _, tool := range ts {
					id := tool.GetId()
					if tool.GetLocal() {
						id += " (local)"
					}
					t.Row(id, cli.FirstLine(tool.GetDescription(), 80))
				}
				return t.Flush()
			})
		},
	}
}

// serverArg is the optional SERVER argument; "" means every server.
func serverArg(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return ""
}

// toolJSON is `tools show --json`: the schemas as JSON values, not the
// base64 strings protobuf JSON makes of bytes fields.
type toolJSON struct {
	Tool         json.RawMessage `json:"tool"`
	StubSource   string          `json:"stub_source"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

var protoJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func protoRaw(m proto.Message) (json.RawMessage, error) {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return b, nil
}

// rawOrNil keeps valid JSON bytes as they are; anything else is dropped
// rather than breaking the whole document.
func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}

func show(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "show SERVER/TOOL",
		Short: "Print a tool's Python stub (--json: the tool, its stub, schemas and annotations)",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.GetTool(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					info, err := protoRaw(r.GetTool())
					if err != nil {
						return err
					}
					return env.PrintJSON(toolJSON{
						Tool: info, StubSource: r.GetStubSource(), InputSchema: rawOrNil(r.GetInputSchemaJson()),
						OutputSchema: rawOrNil(r.GetOutputSchemaJson()), Annotations: rawOrNil(r.GetAnnotationsJson()),
					})
				}
				if r.GetStubSource() == "" {
					return fmt.Errorf("%s has no stub yet (it is being generated); try again in a moment", args[0])
				}
				_, err = fmt.Fprint(env.Stdout, ensureNewline(r.GetStubSource()))
				return err
			})
		},
	}
}

func ensureNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

func refresh(env *cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "refresh [SERVER]",
		Short: "List a server's tools again (all servers, local tools and shared skills without SERVER) and regenerate stubs",
		Args:  cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			server := serverArg(args)
			what := server
			if what == "" {
				what = "all servers"
			}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				// Listing every server's tools again and regenerating the
				// stubs can take seconds: one RPC, so the time taken.
				p := env.Progress("refreshing "+what, 0)
				n, err := c.RefreshTools(cmd.Context(), server)
				p.Done(err)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(map[string]any{"server": server, "tools": n})
				}
				fmt.Fprintf(env.Stdout, "refreshed %s: %d tools\n", what, n)
				return nil
			})
		},
	}
}

// hitJSON is one search hit in `tools search --json`, the schema as a JSON
// value.
type hitJSON struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Score       float64         `json:"score"`
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Import      string          `json:"import"`
	Description string          `json:"description,omitempty"`
	StubSource  string          `json:"stub_source,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

func searchCmd(env *cli.Env) *cobra.Command {
	var (
		detail  string
		limit   int
		servers []string
	)
	cmd := &cobra.Command{
		Use:   "search QUERY...",
		Short: "Find tools and skills for a task, best first",
		Long: `Search the tools of every server (and the shared skills) through the
configured selector plugin, as the MCP face's search_tools does.

--detail name prints ids and import lines, description (the default) adds
each description, full adds the stub source and the input schema.`,
		Args: cli.Args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch detail {
			case "name", "description", "full":
			default:
				return cli.UsageErrorf("--detail must be name, description or full, not %q", detail)
			}
			if limit < 0 {
				return cli.UsageErrorf("--limit must be positive")
			}
			req := &cexecv1.SearchToolsRequest{Query: strings.Join(args, " "), DetailLevel: detail, Limit: int32(limit), Servers: servers}
			return env.Do(cmd.Context(), func(c *client.Client) error {
				r, err := c.SearchTools(cmd.Context(), req)
				if err != nil {
					return err
				}
				for _, w := range r.GetWarnings() {
					fmt.Fprintln(env.Stderr, "warning:", w)
				}
				if env.JSON {
					hits := make([]hitJSON, 0, len(r.GetHits()))
					for _, h := range r.GetHits() {
						hits = append(hits, hitJSON{
							ID: h.GetId(), Kind: h.GetKind(), Score: h.GetScore(), Server: h.GetServer(), Name: h.GetName(),
							Import: h.GetImport(), Description: h.GetDescription(), StubSource: h.GetStubSource(),
							InputSchema: rawOrNil(h.GetInputSchemaJson()),
						})
					}
					return env.PrintJSON(map[string]any{"hits": hits, "warnings": nonNil(r.GetWarnings())})
				}
				printHits(env, r.GetHits(), detail)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&detail, "detail", "description", "name, description or full")
	f.IntVar(&limit, "limit", 0, "most hits to return (default: the daemon's pipeline.search_limit)")
	f.StringSliceVar(&servers, "server", nil, "only these servers (repeat or comma-separate; \"skills\" for skills)")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printHits(env *cli.Env, hits []*cexecv1.SearchHit, detail string) {
	if len(hits) == 0 {
		fmt.Fprintln(env.Stdout, "no matches")
		return
	}
	for i, h := range hits {
		kind := ""
		if h.GetKind() == "skill" {
			kind = " (skill)"
		}
		fmt.Fprintf(env.Stdout, "%d. %s%s  score %.3f\n   %s\n", i+1, h.GetId(), kind, h.GetScore(), h.GetImport())
		if detail == "name" {
			continue
		}
		if d := strings.TrimSpace(h.GetDescription()); d != "" {
			fmt.Fprintf(env.Stdout, "   %s\n", strings.ReplaceAll(d, "\n", "\n   "))
		}
		if detail == "full" {
			if src := h.GetStubSource(); src != "" {
				fmt.Fprintf(env.Stdout, "\n%s", ensureNewline(src))
			}
			if len(h.GetInputSchemaJson()) > 0 {
				fmt.Fprintf(env.Stdout, "input schema: %s\n", h.GetInputSchemaJson())
			}
			fmt.Fprintln(env.Stdout)
		}
	}
}
