package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/cmd/cexecctl/cli"
	"github.com/cexec/cexec/internal/testutil"
)

// TestBenchRunsCexecctlBench builds cexecctl and cexecctl-bench side by
// side, as make build does: `cexecctl bench` is the other binary's, with the
// global flags given before it, its exit codes, help and completions.
func TestBenchRunsCexecctlBench(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "cexecctl")
	for out, pkg := range map[string]string{ctl: "./cmd/cexecctl", filepath.Join(dir, "cexecctl-bench"): "./cmd/cexecctl-bench"} {
		if err := testutil.GoBuild(out, pkg); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "none.sock")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"global flags before bench reach it", []string{"--address", sock, "bench", "exec", "--n", "1"}, cli.ExitNotRunning,
			"", "cexecctl: cexecd is not running at " + sock},
		{"its usage errors", []string{"bench", "exec", "--n", "x"}, cli.ExitUsage, "", `invalid argument "x" for "--n" flag`},
		{"an unknown bench command", []string{"bench", "nope"}, cli.ExitUsage, "", `unknown command "nope" for "cexecctl bench"`},
		{"its help", []string{"bench", "--help"}, cli.ExitOK, "cexecctl bench [command]", ""},
		{"help of bench through cexecctl's help", []string{"help", "bench"}, cli.ExitOK, "tokens ", ""},
		{"a subcommand's help", []string{"bench", "exec", "--help"}, cli.ExitOK, "--concurrency", ""},
		{"completion of a subcommand", []string{"__complete", "bench", "ex"}, cli.ExitOK, "exec\t", ""},
		{"completion of a flag", []string{"__complete", "bench", "exec", "--conc"}, cli.ExitOK, "--concurrency\t", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, ctl, os.Environ(), tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("cexecctl %s: exit %d, want %d\nstdout (want %q):\n%s\nstderr (want %q):\n%s",
					strings.Join(tt.args, " "), code, tt.code, tt.stdout, stdout, tt.stderr, stderr)
			}
		})
	}

	t.Run("without cexecctl-bench", func(t *testing.T) {
		alone := filepath.Join(t.TempDir(), "cexecctl")
		b, err := os.ReadFile(ctl)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(alone, b, 0o755); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := run(t, alone, []string{"PATH=" + t.TempDir()}, "bench", "exec")
		const want = "cexecctl bench is the program cexecctl-bench, which is neither beside cexecctl nor in PATH"
		if code != cli.ExitFailure || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, want %d; stderr %q, want it to say %q", code, cli.ExitFailure, stderr, want)
		}
	})
}

func run(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestBenchNotLinked keeps the benchmarks' dependencies out of cexecctl, which
// pays for every package it links at each start (see package forward).
func TestBenchNotLinked(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/cexecctl")
	cmd.Dir = testutil.ModuleRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, heavy := range []string{"github.com/cexec/cexec/cmd/cexecctl/bench", "github.com/cexec/cexec/client/mcpclient",
			"github.com/mark3labs/mcp-go/", "github.com/santhosh-tekuri/jsonschema"} {
			if pkg == heavy || strings.HasPrefix(pkg, heavy) {
				t.Errorf("cexecctl links %s", pkg)
			}
		}
	}
}
