package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/plugins/sandbox-microsandbox/internal/proctree"
)

// execCmd is `msb exec`: it runs a command in a running sandbox, on this
// machine, and passes its exit status on.
func execCmd(args []string) int {
	const usage = "msb exec <NAME> [-- <COMMAND>...]"
	f, bad := parseFlags(args, map[string]string{"--env": "env", "-e": "env", "--workdir": "workdir", "-w": "workdir",
		"--user": "user", "-u": "user", "--timeout": "timeout", "--rlimit": "rlimit"},
		map[string]string{"--stream": "stream", "--quiet": "quiet", "-q": "quiet", "--no-tty": "no-tty", "--tty": "tty", "-t": "tty"})
	if f == nil {
		return unknownFlag("exec", bad, usage)
	}
	if len(f.pos) != 1 {
		return usageError("error: the following required arguments were not provided:\n  <NAME>", usage)
	}
	if f.bools["stream"] && f.bools["tty"] {
		return usageError("error: the argument '--stream' cannot be used with '--tty'", usage)
	}
	name := f.pos[0]
	var r *record
	if code := locked(func() int {
		var err error
		if r, err = load(name); err != nil {
			return fail("sandbox not found: " + name)
		}
		if r.Status != "Running" {
			if why := bootFailure(); why != nil {
				return fail(fmt.Sprintf("failed to start %q", name), append(why, fmt.Sprintf("run `msb logs --source system %s` for full diagnostics", name))...)
			}
			r.Status = "Running"
		}
		r.Execs = append(r.Execs, os.Getpid())
		if err := save(r); err != nil {
			return fail(err.Error())
		}
		return 0
	}); code != 0 {
		return code
	}
	defer locked(func() int {
		if cur, err := load(name); err == nil {
			cur.Execs = removeInt(cur.Execs, os.Getpid())
			_ = save(cur)
		}
		return 0
	})
	if len(f.after) == 0 {
		return 0
	}
	cmd, code := guestCommand(f, r)
	if cmd == nil {
		return code
	}
	// The fake is the subreaper of what the command leaves behind, so that
	// stopping the sandbox can find it all.
	_ = setSubreaper()
	if err := cmd.Start(); err != nil {
		return fail(fmt.Sprintf("failed to exec %q", f.after[0]), "exec: "+err.Error())
	}
	// A VM's memory bounds everything in it; the fake bounds the address
	// space of the guest command, and so of what it starts, instead.
	mem := uint64(r.MemoryMiB) << 20
	_ = unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: mem, Max: mem}, nil)
	return waitGuest(cmd, name, f.last("timeout"))
}

// guestCommand prepares the command of an exec with the sandbox's
// environment and its guest paths rewritten to host ones; nil and the exit
// status when it cannot run.
func guestCommand(f *flags, r *record) (*exec.Cmd, int) {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}
	for _, kv := range r.Env {
		env[kv[0]] = kv[1]
	}
	for _, e := range f.values["env"] {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fail(fmt.Sprintf("invalid environment variable (expected KEY=value): %s", e))
		}
		env[k] = v
	}
	argv := make([]string, len(f.after))
	for i, a := range f.after {
		argv[i] = r.hostPath(a)
	}
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		for _, d := range strings.Split(env["PATH"], ":") {
			if c := filepath.Join(r.hostPath(d), prog); isExecutable(c) {
				prog = c
				break
			}
		}
	}
	if !isExecutable(prog) {
		code := 127
		kind, hint := "not found", fmt.Sprintf("is `%s` on PATH inside the sandbox? Try `msb exec ... -- which %s`", f.after[0], f.after[0])
		if _, err := os.Stat(prog); err == nil {
			code, kind, hint = 126, "permission denied", fmt.Sprintf("check the binary's permissions — `chmod +x %s` may be needed", f.after[0])
		}
		fail(fmt.Sprintf("failed to exec %q", f.after[0]), fmt.Sprintf("%s: No such file or directory (os error 2) (ENOENT)", kind), hint)
		return nil, code
	}
	cmd := exec.Command(prog, argv[1:]...)
	cmd.Args[0] = f.after[0]
	for k, v := range env {
		switch k {
		case "PYTHONPATH", "PATH", "CEXEC_PATH":
			v = r.hostList(v)
		case "CEXEC_PACKAGES":
			v = r.hostPackages(v)
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	wd := f.last("workdir")
	if wd == "" {
		wd = r.Workdir
	}
	if wd != "" {
		cmd.Dir = r.hostPath(wd)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if f.bools["stream"] {
		cmd.Stdin = os.Stdin
	} else {
		// Buffered exec reads all of stdin before it starts the command.
		data, _ := io.ReadAll(os.Stdin)
		cmd.Stdin = bytes.NewReader(data)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, 0
}

// waitGuest waits for the started command of an exec in sandbox name, for
// at most the duration limit when it is not empty, and returns msb exec's
// exit status.
func waitGuest(cmd *exec.Cmd, name, limit string) int {
	var timeout <-chan time.Time
	if limit != "" {
		d, err := time.ParseDuration(limit)
		if err != nil {
			return fail("invalid duration: " + limit)
		}
		timeout = time.After(d)
	}
	// msb exec forwards nothing on SIGTERM; it dies and the guest command
	// goes with the session.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		// A stop holds the lock until the sandbox is recorded stopped.
		gone := locked(func() int {
			if cur, err := load(name); err != nil || cur.Status != "Running" {
				return 1
			}
			return 0
		})
		if gone != 0 {
			// The VM went away under the session.
			return fail("exec session ended without exit event")
		}
		return code
	case <-timeout:
		proctree.KillDescendants(os.Getpid())
		<-done
		return fail("exec timed out after " + limit)
	case <-sigs:
		proctree.KillDescendants(os.Getpid())
		return 130
	}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func removeInt(xs []int, x int) []int {
	out := xs[:0]
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}
