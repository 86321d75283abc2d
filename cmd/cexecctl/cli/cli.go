// Package cli holds what every cexecctl command shares: the global flags,
// connecting to the daemon, output in text or JSON, and exit codes.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
)

// Exit codes of cexecctl.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailure: the command ran and failed (an RPC error, a config with
	// errors, a benchmark run that went wrong).
	ExitFailure = 1
	// ExitUsage: bad flags or arguments.
	ExitUsage = 2
	// ExitNotRunning: no daemon answers at the address.
	ExitNotRunning = 3
)

// Env is the state shared by all commands: global flags and output streams.
type Env struct {
	// Address of the daemon; "" means client.DefaultAddress().
	Address string
	// JSON selects machine-readable output on stdout.
	JSON   bool
	Stdout io.Writer
	Stderr io.Writer
}

// AddGlobalFlags registers --address and --json on root for all commands.
func (e *Env) AddGlobalFlags(root *cobra.Command) {
	root.PersistentFlags().StringVar(&e.Address, "address", "",
		"cexecd socket (default $"+endpoint.AddressEnv+", else $"+endpoint.SocketEnv+", else the daemon's default socket)")
	root.PersistentFlags().BoolVar(&e.JSON, "json", false, "print machine-readable JSON")
}

// Client connects to the daemon at the configured address.
func (e *Env) Client(ctx context.Context) (*client.Client, error) {
	return client.New(ctx, e.Address)
}

// Do connects, runs fn with the client and closes the connection.
func (e *Env) Do(ctx context.Context, fn func(*client.Client) error) error {
	c, err := e.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return fn(c)
}

var protoJSON = protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}

// PrintProto writes m as protobuf JSON (proto field names, int64 as strings,
// as the canonical mapping says) to stdout.
func (e *Env) PrintProto(m proto.Message) error {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(e.Stdout, "%s\n", b)
	return err
}

// PrintJSON writes v as indented JSON to stdout.
func (e *Env) PrintJSON(v any) error {
	enc := json.NewEncoder(e.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	return nil
}

// FormatDiagnostic renders d the way compilers do:
// "file:line:col: error: summary: detail".
func FormatDiagnostic(d *cexecv1.Diagnostic) string {
	var b strings.Builder
	if d.GetFilename() != "" {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.GetFilename(), d.GetLine(), d.GetColumn())
	}
	b.WriteString(d.GetSeverity())
	b.WriteString(": ")
	b.WriteString(d.GetSummary())
	if d.GetDetail() != "" {
		b.WriteString(": ")
		b.WriteString(d.GetDetail())
	}
	return b.String()
}

// ExitError makes Execute exit with Code after printing Err (if not nil).
type ExitError struct {
	Code int
	Err  error
}

// Error returns the wrapped error's message.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// UsageErrorf returns an error that exits with ExitUsage.
func UsageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// TimeoutMs is the duration flag name of fl as a request's timeout_ms: 0
// when the flag is not given, which the daemon takes as the sandbox's
// default. A given 0, negative or sub-millisecond value would silently be
// that default too, so it is a usage error.
func TimeoutMs(fl *pflag.FlagSet, name string) (int64, error) {
	if !fl.Changed(name) {
		return 0, nil
	}
	d, err := fl.GetDuration(name)
	if err != nil {
		return 0, fmt.Errorf("read --%s: %w", name, err)
	}
	if d < time.Millisecond {
		return 0, UsageErrorf("--%s must be at least 1ms, got %s (leave it out for the sandbox's default)", name, d)
	}
	return d.Milliseconds(), nil
}

// ExitCode maps an error returned by a command to cexecctl's exit code.
func ExitCode(err error) int {
	var ee *ExitError
	var nr *client.NotRunningError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &nr):
		return ExitNotRunning
	case strings.HasPrefix(err.Error(), "unknown command"):
		// cobra reports unknown subcommands with a plain error.
		return ExitUsage
	}
	return ExitFailure
}

// Args wraps a cobra argument validator so its errors exit with ExitUsage.
func Args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		return nil
	}
}

// Group makes cmd a noun that only holds subcommands: an unknown
// subcommand or none at all is a usage error (cobra would print help and
// exit 0).
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = Args(cobra.NoArgs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return &ExitError{Code: ExitUsage}
	}
	return cmd
}
