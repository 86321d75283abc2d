// Package doctor is `cexecctl doctor`: it checks that this machine can run
// cexecd with its config (bubblewrap, user namespaces, seccomp, cgroups,
// Python, the servers' commands, plugin binaries, the socket's folder,
// data_dir's space) and says how to fix what fails. A running daemon runs
// the checks itself and adds its live state; without one (or with
// --config) `cexecd doctor --json` runs them, so no daemon is needed.
package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

// check and report mirror `cexecd doctor --json`.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

type report struct {
	Config string  `json:"config,omitempty"`
	Daemon bool    `json:"daemon"`
	Checks []check `json:"checks"`
	OK     bool    `json:"ok"`
}

// Command returns the doctor command.
func Command(env *cli.Env) *cobra.Command {
	var configFile, cexecd string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this machine and the config for what cexecd needs, with a fix for each problem",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var rep report
			var err error
			if configFile == "" {
				rep, err = fromDaemon(ctx, env)
			}
			var nr *client.NotRunningError
			if configFile != "" || errors.As(err, &nr) {
				rep, err = offline(ctx, cexecd, configFile)
			}
			if err != nil {
				return err
			}
			rep.OK = true
			for _, c := range rep.Checks {
				if c.Status == "fail" {
					rep.OK = false
				}
			}
			if env.JSON {
				if err := env.PrintJSON(rep); err != nil {
					return err
				}
			} else {
				print(env, rep)
			}
			if !rep.OK {
				return &cli.ExitError{Code: cli.ExitFailure}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "check this config file without asking a running daemon")
	cmd.Flags().StringVar(&cexecd, "cexecd", "", "cexecd binary that runs the checks without a daemon (default: beside cexecctl, else in PATH)")
	return cmd
}

func fromDaemon(ctx context.Context, env *cli.Env) (report, error) {
	var rep report
	err := env.Do(ctx, func(c *client.Client) error {
		r, err := c.Doctor(ctx)
		if err != nil {
			return err
		}
		rep = report{Config: r.GetConfig(), Daemon: true}
		for _, c := range r.GetChecks() {
			rep.Checks = append(rep.Checks, check{Name: c.GetName(), Status: c.GetStatus(), Detail: c.GetDetail(), Fix: c.GetFix()})
		}
		return nil
	})
	return rep, err
}

// offline runs `cexecd doctor --json`, whose exit status 1 only means a
// check failed.
func offline(ctx context.Context, cexecd, configFile string) (report, error) {
	bin, err := findCexecd(cexecd)
	if err != nil {
		return report{}, err
	}
	args := []string{"doctor", "-json"}
	if configFile != "" {
		args = append(args, "-config", configFile)
	}
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, bin, args...)
	c.Stdout, c.Stderr = &stdout, &stderr
	runErr := c.Run()
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return report{}, fmt.Errorf("%s doctor: %v: %s", bin, runErr, strings.TrimSpace(stderr.String()))
	}
	return rep, nil
}

func findCexecd(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	p, err := cli.FindBinary("cexecd")
	if err != nil {
		return "", fmt.Errorf("no daemon is running and cexecd, which runs the checks without one, is neither beside cexecctl nor in PATH: give --cexecd /path/to/cexecd")
	}
	return p, nil
}

func print(env *cli.Env, rep report) {
	where := "checked without a daemon"
	if rep.Daemon {
		where = "checked by the running daemon"
	}
	cfg := rep.Config
	if cfg == "" {
		cfg = "built-in defaults"
	}
	fmt.Fprintf(env.Stdout, "config %s (%s)\n\n", cfg, where)
	for _, c := range rep.Checks {
		fmt.Fprintf(env.Stdout, "%-5s %-26s %s\n", strings.ToUpper(c.Status), c.Name, strings.ReplaceAll(c.Detail, "\n", "\n      "))
		if c.Fix != "" && c.Status != "ok" {
			fmt.Fprintf(env.Stdout, "      fix: %s\n", c.Fix)
		}
	}
	if rep.OK {
		fmt.Fprintln(env.Stdout, "\nno check failed")
	} else {
		fmt.Fprintln(env.Stdout, "\nsome checks failed: see fix: under each")
	}
}
