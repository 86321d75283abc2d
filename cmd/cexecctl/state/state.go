// Package state is `cexecctl state`: read, write, list and remove a
// tenant's state files, the same files sandboxed code sees under
// /workspace/state and reads with cexec.get_state.
package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/bytesize"
)

// Command returns the state command and its subcommands.
func Command(env *cli.Env) *cobra.Command {
	var tenant string
	cmd := cli.Group(&cobra.Command{
		Use:   "state",
		Short: "Read and write a tenant's state files (/workspace/state in the sandbox)",
		Long: `State files keep data between executions, sessions and daemon restarts.
Each is JSON or YAML, by the extension of its name (.json, .yaml or .yml).
Sandboxed code reads and writes the same files with cexec.get_state and
cexec.save_state, or directly under /workspace/state.`,
	})
	cli.TenantFlag(cmd.PersistentFlags(), &tenant)
	cmd.AddCommand(get(env, &tenant), put(env, &tenant), ls(env, &tenant), rm(env, &tenant), version(env, &tenant))
	return cmd
}

func get(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Print a state file as stored (with --json: its value as JSON, YAML converted)",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				if env.JSON {
					v, err := c.GetStateJSON(cmd.Context(), *tenant, args[0])
					if err != nil {
						return err
					}
					var buf bytes.Buffer
					if err := json.Indent(&buf, v, "", "  "); err != nil {
						return fmt.Errorf("state %s: the daemon answered invalid JSON: %w", args[0], err)
					}
					buf.WriteByte('\n')
					_, err = env.Stdout.Write(buf.Bytes())
					return err
				}
				data, err := c.GetState(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if len(data) > 0 && data[len(data)-1] != '\n' {
					data = append(data, '\n')
				}
				_, err = env.Stdout.Write(data)
				return err
			})
		},
	}
}

// Formats of state files and of put's input.
const (
	formatJSON = "json"
	formatYAML = "yaml"
)

// formatOf is the format a file name's extension says, or "".
func formatOf(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return formatJSON
	case ".yaml", ".yml":
		return formatYAML
	}
	return ""
}

// putPlan is what put sends: the state's name and whether the data is a
// JSON value the daemon converts to the name's format.
type putPlan struct {
	name     string
	fromJSON bool
}

// planPut decides the state name and conversion from the NAME and FILE
// arguments (file "" or "-" is stdin). A NAME without an extension takes
// FILE's .json/.yaml/.yml, else .json; one with another extension is
// refused, as saving x.txt as x.txt.json left the state where "state get
// x.txt" does not find it. The input's format is FILE's extension, else
// the name's. JSON input goes into a YAML name by conversion; YAML input
// into a JSON name is refused, since the YAML types JSON lacks (dates,
// binary, anchors) would change meaning silently.
func planPut(name, file string) (putPlan, error) {
	in := ""
	if file != "" && file != "-" {
		in = formatOf(file)
	}
	if formatOf(name) == "" {
		if ext := filepath.Ext(name); ext != "" {
			base := strings.TrimSuffix(name, ext)
			return putPlan{}, cli.UsageErrorf("state %s: a state's name ends in .json, .yaml or .yml, which says how it is stored: name it %s.json or %s.yaml",
				name, base, base)
		}
		switch in {
		case formatYAML:
			name += filepath.Ext(file)
		default:
			name += ".json"
		}
	}
	stored := formatOf(name)
	if in == "" {
		in = stored
	}
	switch {
	case in == stored:
		return putPlan{name: name}, nil
	case in == formatJSON:
		return putPlan{name: name, fromJSON: true}, nil
	}
	return putPlan{}, cli.UsageErrorf("%s is YAML but state %s is stored as JSON: name it %s.yaml, or give JSON",
		file, name, strings.TrimSuffix(name, filepath.Ext(name)))
}

func put(env *cli.Env, tenant *string) *cobra.Command {
	var ifVersion string
	cmd := &cobra.Command{
		Use:   "put NAME [FILE | -]",
		Short: "Store a state file from FILE or standard input (JSON or YAML, by extension)",
		Long: `Store a state file atomically: the old content stays until the new one is
complete on disk, and a write over the tenant's disk quota or the size limit
changes nothing.

NAME's extension (.json, .yaml or .yml) decides how the state is stored; a
NAME without an extension takes FILE's, else .json, and the output says the
name it was saved as; a NAME with another extension (notes.txt) is refused.
The input is read from FILE, or from standard input when FILE is "-" or
missing, and must be in FILE's format (standard input: NAME's format). JSON
input for a YAML name is converted.

With --if-version (from "cexecctl state version NAME"; "" for a state that
must not exist yet) the state is stored only while it is still at that
version: a save in between makes it fail with exit code 1, writing nothing.
The input must then be JSON.`,
		Args: cli.Args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) == 2 {
				file = args[1]
			}
			plan, err := planPut(args[0], file)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("if-version") && !plan.fromJSON && !strings.HasSuffix(plan.name, ".json") {
				return cli.UsageErrorf("--if-version takes JSON input; %s is YAML", plan.name)
			}
			var data []byte
			p := noProgress
			if file == "" || file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, p, err = readState(env, file, plan.name)
			}
			if err != nil {
				p(err)
				return fmt.Errorf("read state data: %w", err)
			}
			if cmd.Flags().Changed("if-version") {
				err = env.Do(cmd.Context(), func(c *client.Client) error {
					r, err := c.SaveStateIf(cmd.Context(), *tenant, plan.name, data, ifVersion)
					p(err)
					if err != nil {
						return err
					}
					if env.JSON {
						return env.PrintProto(r)
					}
					_, err = fmt.Fprintf(env.Stdout, "saved %s (%s) for tenant %s, version %s\n", savedAs(args[0], r.GetName()), bytesize.Format(r.GetBytes()), *tenant, r.GetVersion())
					return err
				})
				p(err)
				return err
			}
			// p ends the report once the daemon answered, before the result
			// is printed, or after env.Do when it could not be reached.
			err = env.Do(cmd.Context(), func(c *client.Client) error {
				var info *cexecv1.StateInfo
				if plan.fromJSON {
					info, err = c.SaveState(cmd.Context(), *tenant, plan.name, data)
				} else {
					info, err = c.PutState(cmd.Context(), *tenant, plan.name, data)
				}
				p(err)
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintProto(&cexecv1.PutStateResponse{State: info})
				}
				_, err = fmt.Fprintf(env.Stdout, "saved %s (%s) for tenant %s\n", savedAs(args[0], info.GetName()), bytesize.Format(info.GetBytes()), *tenant)
				return err
			})
			p(err)
			return err
		},
	}
	cmd.Flags().StringVar(&ifVersion, "if-version", "", "store only while the state is at this version (see state version)")
	return cmd
}

// savedAs names the state put saved, saying so when it is not the NAME
// given: "state get" needs the name with its extension.
func savedAs(given, stored string) string {
	if given == stored {
		return stored
	}
	return given + " as " + stored
}

func version(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:   "version NAME",
		Short: "Print a state's version, for put --if-version",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				_, v, err := c.LoadState(cmd.Context(), *tenant, args[0])
				if err != nil {
					return err
				}
				if env.JSON {
					return env.PrintJSON(map[string]string{"name": args[0], "version": v})
				}
				_, err = fmt.Fprintln(env.Stdout, v)
				return err
			})
		},
	}
}

func ls(env *cli.Env, tenant *string) *cobra.Command {
	return cli.List(env, "List state files: NAME FORMAT SIZE MODIFIED", func(ctx context.Context, c *client.Client) error {
		states, err := c.ListState(ctx, *tenant)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintProto(&cexecv1.ListStateResponse{States: states})
		}
		t := cli.NewTable(env.Stdout, "NAME", "FORMAT", "SIZE", "MODIFIED")
		for _, s := range states {
			t.Row(s.GetName(), s.GetFormat(), bytesize.Format(s.GetBytes()), cli.UnixMs(s.GetModifiedUnixMs()))
		}
		return t.Flush()
	})
}

func rm(env *cli.Env, tenant *string) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Remove state files (allowed also over the disk quota)",
		Args:    cli.Args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return env.Do(cmd.Context(), func(c *client.Client) error {
				removed := []string{}
				for _, name := range args {
					if err := c.DeleteState(cmd.Context(), *tenant, name); err != nil {
						return err
					}
					removed = append(removed, name)
					if !env.JSON {
						fmt.Fprintf(env.Stdout, "removed %s\n", name)
					}
				}
				if env.JSON {
					return env.PrintJSON(map[string]any{"tenant": *tenant, "removed": removed})
				}
				return nil
			})
		},
	}
}

// largeState is the size from which `state put` shows its progress.
const largeState = 1 << 20

func noProgress(error) {}

// readState reads FILE; for a large one it starts a progress report of
// the bytes read, and returns the function that ends it once the daemon
// has stored them.
func readState(env *cli.Env, file, name string) ([]byte, func(error), error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, noProgress, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, noProgress, err
	}
	if !st.Mode().IsRegular() || st.Size() < largeState {
		data, err := io.ReadAll(f)
		return data, noProgress, err
	}
	p := env.ProgressBytes("saving state "+name, st.Size())
	data, err := io.ReadAll(p.Reader(f))
	return data, p.Done, err
}
