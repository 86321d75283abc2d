// Command fakemsb is a stand-in for microsandbox's msb 0.7 CLI in the
// sandbox-microsandbox tests, for machines that cannot boot microVMs. It
// reproduces what the backend relies on of the real CLI, as msb 0.7.2
// prints it: the JSON of list, inspect and metrics, the "error: ..." lines
// with "→" hints on stderr, exit status 1 for its own errors and 2 for
// rejected arguments, doctor's checks, and exec --stream passing the
// command's exit status on.
//
// There is no VM and no isolation: create records the sandbox under
// $MSB_HOME and exec runs the command on this machine, with the guest
// paths of the sandbox's mounts rewritten to their host sources in its
// arguments, environment and working directory (read-only mounts are not
// enforced). Stopping a sandbox kills what its exec sessions started, as a
// VM's end would.
//
// Test knobs: FAKEMSB_CPUINFO and FAKEMSB_KVM replace /proc/cpuinfo and
// /dev/kvm in doctor's checks (a boot fails whenever doctor would);
// FAKEMSB_BOOT_FAIL=1 makes boots fail like a VM that dies at start;
// FAKEMSB_BOOT_DELAY (a Go duration) makes a successful boot take that
// long; FAKEMSB_VERSION replaces the version --version prints.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

const version = "0.7.2"

func main() {
	os.Exit(run(os.Args[1:]))
}

// logFlags are msb's global diagnostic flags, accepted anywhere.
var logFlags = map[string]bool{"--error": true, "--warn": true, "--info": true, "--debug": true, "--trace": true}

func run(args []string) int {
	var rest []string
	for i, a := range args {
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if !logFlags[a] {
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return usageError("error: 'msb' requires a subcommand but one was not provided", "msb [OPTIONS] <COMMAND>")
	}
	cmd, args := rest[0], rest[1:]
	switch cmd {
	case "--version", "-V":
		fmt.Println("msb " + envOr("FAKEMSB_VERSION", version))
		return 0
	case "doctor":
		return doctor()
	case "create":
		return create(args)
	case "exec":
		return execCmd(args)
	case "stop":
		return stop(args)
	case "remove", "rm":
		return remove(args)
	case "list", "ls":
		return list(args)
	case "inspect":
		return inspect(args)
	case "metrics":
		return metrics(args)
	}
	return usageError(fmt.Sprintf("error: unrecognized subcommand '%s'", cmd), "msb [OPTIONS] <COMMAND>")
}

// usageError prints a clap-style usage error and returns 2.
func usageError(msg, usage string) int {
	fmt.Fprintf(os.Stderr, "%s\n\nUsage: %s\n\nFor more information, try '--help'.\n", msg, usage)
	return 2
}

// fail prints msb's error block and returns 1.
func fail(msg string, hints ...string) int {
	fmt.Fprintf(os.Stderr, "error: %s\n", msg)
	for _, h := range hints {
		fmt.Fprintf(os.Stderr, "  → %s\n", h)
	}
	return 1
}

// flags parses "--flag value", "-f value", "--flag=value" and booleans.
type flags struct {
	values map[string][]string
	bools  map[string]bool
	pos    []string
	after  []string // after "--"
}

// parseFlags parses args against the value flags and boolean flags of a
// command (aliases map to canonical names); it returns the unknown flag.
func parseFlags(args []string, valued, boolean map[string]string) (*flags, string) {
	f := &flags{values: map[string][]string{}, bools: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.after = args[i+1:]
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			f.pos = append(f.pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if c, ok := valued[name]; ok {
			if !hasVal {
				if i+1 >= len(args) {
					return nil, a
				}
				i++
				val = args[i]
			}
			f.values[c] = append(f.values[c], val)
			continue
		}
		if c, ok := boolean[a]; ok {
			f.bools[c] = true
			continue
		}
		return nil, a
	}
	return f, ""
}

func (f *flags) last(name string) string {
	v := f.values[name]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func unknownFlag(cmd, flag, usage string) int {
	return usageError(fmt.Sprintf("error: unexpected argument '%s' found\n\n  tip: to pass '%s' as a value, use '-- %s'", flag, flag, flag), usage)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func printJSON(v any) int {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(err.Error())
	}
	fmt.Println(string(data))
	return 0
}

func jsonTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000+00:00") }
