package msb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// minVersion is the oldest msb whose command line this backend speaks.
var minVersion = [3]int{0, 7, 0}

// cli runs the msb command-line tool.
type cli struct {
	path    string
	home    string
	version [3]int
}

// CommandError is a failure of msb itself (not of a program in a
// sandbox): msb could not do what it was asked, said why on stderr and
// exited with ExitCode (1 for its own errors, 2 for rejected arguments).
type CommandError struct {
	Command  string
	ExitCode int
	Message  string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("msb %s failed (exit status %d): %s", e.Command, e.ExitCode, e.Message)
}

// notFound reports whether msb said the sandbox does not exist.
func (e *CommandError) notFound() bool {
	return strings.HasPrefix(e.Message, "sandbox not found")
}

// env is msb's environment: the plugin's own (PATH, HOME, the locale) with
// colours off and, when configured, its state directory.
func (c *cli) env() []string {
	env := append(os.Environ(), "NO_COLOR=1")
	if c.home != "" {
		env = append(env, "MSB_HOME="+c.home)
	}
	return env
}

// command builds an msb invocation.
func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.path, args...)
	cmd.Env = c.env()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs msb and returns its stdout. A non-zero exit is a *CommandError
// carrying what msb printed as its error.
func (c *cli) run(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := c.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("msb %s: %w", args[0], ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return stdout.Bytes(), &CommandError{Command: args[0], ExitCode: ee.ExitCode(), Message: errorText(stderr.String())}
	}
	return nil, fmt.Errorf("run msb %s: %w", args[0], err)
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// errorText condenses msb's stderr to its error: the text after "error:"
// with the "→" lines that follow it as a parenthesised list, or the last
// lines when msb printed no "error:" line (clap usage errors print one
// too).
func errorText(stderr string) string {
	lines := strings.Split(ansi.ReplaceAllString(stderr, ""), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		msg, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "error:")
		if !ok {
			continue
		}
		msg = strings.TrimSpace(msg)
		var hints []string
		for i+1 < len(lines) {
			h, ok := strings.CutPrefix(strings.TrimSpace(lines[i+1]), "→")
			if !ok {
				break
			}
			hints = append(hints, strings.TrimSpace(h))
			i++
		}
		if len(hints) > 0 {
			msg += " (" + strings.Join(hints, "; ") + ")"
		}
		out = append(out, msg)
	}
	if len(out) > 0 {
		return strings.Join(out, "; ")
	}
	s := strings.TrimSpace(strings.Join(lines, "\n"))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	if s == "" {
		return "no error message"
	}
	return s
}

var versionRe = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// resolveCLI finds msb and checks its version.
func resolveCLI(ctx context.Context, name, home string) (*cli, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed (%v); install microsandbox 0.7, for example `npm install -g @superradcompany/microsandbox-linux-x64-gnu`, or set msb to its path", name, err)
	}
	c := &cli{path: p, home: home}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := c.run(ctx, "--version")
	if err != nil {
		return nil, err
	}
	m := versionRe.FindStringSubmatch(string(out))
	if m == nil {
		return nil, fmt.Errorf("%s --version printed %q, not a version", p, strings.TrimSpace(string(out)))
	}
	for i := range c.version {
		c.version[i], _ = strconv.Atoi(m[i+1])
	}
	if !versionAtLeast(c.version, minVersion) {
		return nil, fmt.Errorf("%s is msb %d.%d.%d; this backend drives msb %d.%d or newer (older releases have another command line; a 0.2 `msb server` works with api = \"server\")",
			p, c.version[0], c.version[1], c.version[2], minVersion[0], minVersion[1])
	}
	return c, nil
}

func versionAtLeast(v, want [3]int) bool {
	for i := range v {
		if v[i] != want[i] {
			return v[i] > want[i]
		}
	}
	return true
}

// doctor runs `msb doctor`, which checks the host's virtualisation; nil
// means microVMs can boot here.
func (c *cli) doctor(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := c.run(ctx, "doctor")
	var ce *CommandError
	if errors.As(err, &ce) {
		return fmt.Errorf("msb doctor: %s", ce.Message)
	}
	return err
}

// listEntry is one element of `msb list --format json`.
type listEntry struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	Image     string `json:"image"`
}

// list runs `msb list --format json`, filtered by labels (KEY=VALUE).
func (c *cli) list(ctx context.Context, labels ...string) ([]listEntry, error) {
	args := []string{"list", "--format", "json"}
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	out, err := c.run(ctx, args...)
	if err != nil {
		return nil, err
	}
	var entries []listEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("msb list printed something that is not its JSON list: %w", err)
	}
	return entries, nil
}

// inspection is the part of `msb inspect --format json` the backend reads.
type inspection struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Config struct {
		Labels    map[string]string `json:"labels"`
		Resources struct {
			CPUs      int64 `json:"cpus"`
			MemoryMiB int64 `json:"memory_mib"`
		} `json:"resources"`
	} `json:"config"`
}

// inspect runs `msb inspect NAME --format json`.
func (c *cli) inspect(ctx context.Context, name string) (*inspection, error) {
	out, err := c.run(ctx, "inspect", name, "--format", "json")
	if err != nil {
		return nil, err
	}
	var in inspection
	if err := json.Unmarshal(out, &in); err != nil {
		return nil, fmt.Errorf("msb inspect printed something that is not its JSON: %w", err)
	}
	return &in, nil
}

// metricsEntry is one element of `msb metrics --format json`.
type metricsEntry struct {
	Name        string  `json:"name"`
	State       string  `json:"state"`
	MemoryBytes int64   `json:"memory_bytes"`
	CPUPercent  float64 `json:"cpu_percent"`
}

// metrics returns the live metrics of every running sandbox by name.
func (c *cli) metrics(ctx context.Context) (map[string]metricsEntry, error) {
	out, err := c.run(ctx, "metrics", "--format", "json")
	if err != nil {
		return nil, err
	}
	var entries []metricsEntry
	if err := json.Unmarshal(out, &entries); err != nil {
		return nil, fmt.Errorf("msb metrics printed something that is not its JSON list: %w", err)
	}
	m := make(map[string]metricsEntry, len(entries))
	for _, e := range entries {
		m[e.Name] = e
	}
	return m, nil
}

// remove stops a sandbox if it runs and removes it. A sandbox that does
// not exist is not an error: removal is how every failure is cleaned up.
// A removal racing a stop that a kill started is tried once more.
func (c *cli) remove(ctx context.Context, name string) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		_, err = c.run(ctx, "remove", "--force", name)
		var ce *CommandError
		switch {
		case err == nil || errors.As(err, &ce) && ce.notFound():
			return nil
		case ce == nil:
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}
