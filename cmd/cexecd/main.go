// Command cexecd is the cexec daemon. It runs in the foreground:
//
//	cexecd [-config FILE] [-socket PATH] [-data-dir DIR] [-log-level L] [-plugin-dir DIR] [-log-json]
//	cexecd validate [-config FILE] [flags]
//	cexecd doctor [-json] [-config FILE] [flags]
//	cexecd version
//
// Exit status: 0 ok, 1 failure or invalid configuration, 2 usage error,
// 3 another cexecd owns the socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cexec/cexec/core/daemon"
	"github.com/cexec/cexec/core/workflow/jqworker"
	"github.com/cexec/cexec/internal/maxprocs"
	"github.com/cexec/cexec/internal/version"
)

// started is taken as early as Go code runs, for the "socket ready" figure.
var started = time.Now()

func main() {
	if jqworker.Requested() {
		os.Exit(jqworker.Main())
	}
	maxprocs.Set()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && (args[0] == "validate" || args[0] == "doctor" || args[0] == "version" || args[0] == "help") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("cexecd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := daemon.Options{Stderr: stderr, Started: started}
	fs.StringVar(&o.ConfigFile, "config", "", "config file (default ./"+daemon.DefaultConfigFile+" if present, else built-in defaults)")
	fs.StringVar(&o.Overrides.Socket, "socket", "", "control API unix socket (overrides the config and $CEXEC_SOCKET)")
	fs.StringVar(&o.Overrides.DataDir, "data-dir", "", "data directory")
	fs.StringVar(&o.Overrides.LogLevel, "log-level", "", "log level: trace, debug, info, warn, error")
	fs.StringVar(&o.Overrides.PluginDir, "plugin-dir", "", "directory plugin binaries are run from")
	fs.StringVar(&o.Overrides.SandboxBackend, "sandbox-backend", "", "sandbox plugin to use")
	fs.BoolVar(&o.LogJSON, "log-json", false, "log JSON lines instead of text")
	asJSON := false
	if cmd == "doctor" {
		fs.BoolVar(&asJSON, "json", false, "print the checks as JSON")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: cexecd [flags]            run the daemon in the foreground\n"+
			"       cexecd validate [flags]   check the config and its plugins, print diagnostics\n"+
			"       cexecd doctor [-json] [flags]  check this machine against the config, with fixes\n"+
			"       cexecd version\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cexecd %s: unexpected argument %q\n", cmd, fs.Arg(0))
		fs.Usage()
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default so a second one kills.
	go func() {
		<-ctx.Done()
		stop()
	}()

	var err error
	switch cmd {
	case "help":
		fs.Usage()
		return 0
	case "version":
		fmt.Fprintf(stdout, "cexecd %s\n", version.Version)
		return 0
	case "validate":
		if err = daemon.Validate(ctx, o); err == nil {
			fmt.Fprintln(stdout, "configuration is valid")
		}
	case "doctor":
		if err = daemon.Doctor(ctx, o, asJSON, stdout); errors.Is(err, daemon.ErrChecksFailed) {
			return 1
		}
	default:
		err = daemon.Run(ctx, o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cexecd: %v\n", err)
	}
	return daemon.ExitCode(err)
}
