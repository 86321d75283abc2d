package tokenbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/client"
	"github.com/cexec/cexec/internal/tailbuf"
)

// daemon is a private cexecd on a temporary socket.
type daemon struct {
	cmd    *exec.Cmd
	exited chan error
	socket string
	stderr *tailbuf.Buffer
}

// config is the daemon's cexec.hcl: the default config's plugins (bwrap,
// the embeddings selector, the PII guard) and the benchmark's servers.
func config(o Options, dir string, d *data, servers []server) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `cexec {
  data_dir    = %q
  plugin_dir  = %q
  servers_dir = %q
  skills_dir  = %q
  log_level   = "warn"
}
plugin "sandbox" "bwrap" {}
plugin "selector" "embeddings" {}
plugin "guard" "pii" {}
pipeline {
  selector = "embeddings"
  guards   = ["pii"]
}
sandbox {
  backend = "bwrap"
  pool {
    warm = 1
  }
}
`, filepath.Join(dir, "data"), o.PluginDir, filepath.Join(dir, "servers"), filepath.Join(dir, "skills"))
	byTenant := map[string][]string{}
	for _, s := range servers {
		args, _ := json.Marshal(s.args)
		fmt.Fprintf(&b, "mcp_server %q {\n  command = %q\n  args    = %s\n  timeout = \"60s\"\n", s.name, s.command, args)
		if s.memory {
			p, err := d.memoryFile(dir, "memory-daemon.jsonl")
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  env     = { MEMORY_FILE_PATH = %q }\n", p)
		}
		b.WriteString("}\n")
		byTenant[s.tenant] = append(byTenant[s.tenant], s.name)
	}
	for _, t := range []string{tenantRef, tenantCatalog} {
		names, _ := json.Marshal(byTenant[t])
		fmt.Fprintf(&b, "tenant %q {\n  allowed_servers = %s\n}\n", t, names)
	}
	p := filepath.Join(dir, "cexec.hcl")
	return p, os.WriteFile(p, []byte(b.String()), 0o600)
}

func startDaemon(ctx context.Context, o Options, dir string, d *data, servers []server) (*daemon, error) {
	cfg, err := config(o, dir, d, servers)
	if err != nil {
		return nil, err
	}
	dm := &daemon{socket: filepath.Join(dir, "cexecd.sock"), exited: make(chan error, 1), stderr: tailbuf.New(3000)}
	dm.cmd = exec.Command(o.Cexecd, "-config", cfg, "-socket", dm.socket)
	dm.cmd.Stderr = dm.stderr
	if err := dm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Cexecd, err)
	}
	go func() { dm.exited <- dm.cmd.Wait() }()
	if err := dm.ready(ctx, servers); err != nil {
		dm.stop()
		return nil, fmt.Errorf("%w\ncexecd stderr:\n%s", err, strings.TrimSpace(dm.stderr.String()))
	}
	return dm, nil
}

// ready waits until every server is connected and search finds a tool of
// each tenant: the selector indexes the catalog in the background.
func (dm *daemon) ready(ctx context.Context, servers []server) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	poll := func(what string, ok func() bool) error {
		for !ok() {
			select {
			case err := <-dm.exited:
				return fmt.Errorf("cexecd exited (%v) while waiting for %s", err, what)
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		return nil
	}
	var c *client.Client
	if err := poll("the control socket", func() bool {
		var err error
		c, err = client.New(ctx, dm.socket)
		return err == nil
	}); err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	var states []string
	if err := poll("the servers to connect", func() bool {
		list, err := c.ListServers(ctx)
		if err != nil {
			return false
		}
		connected := 0
		states = states[:0]
		for _, s := range list {
			states = append(states, s.GetName()+": "+s.GetState()+" "+s.GetLastError())
			if s.GetState() == "ok" && slices.ContainsFunc(servers, func(x server) bool { return x.name == s.GetName() }) {
				connected++
			}
		}
		return connected == len(servers)
	}); err != nil {
		return fmt.Errorf("%w (%s)", err, strings.Join(states, "; "))
	}
	for tenant, probe := range map[string]string{tenantRef: "filesystem/read_text_file", tenantCatalog: "livemcpbench/"} {
		f, err := dm.face(ctx, tenant)
		if err != nil {
			return err
		}
		err = poll("search_tools to find "+probe, func() bool {
			r, err := f.c.callTool(ctx, "search_tools", map[string]any{"query": "read a text file or get a stock price", "limit": 50})
			return err == nil && strings.Contains(r.text, probe)
		})
		f.close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (dm *daemon) stop() {
	_ = dm.cmd.Process.Signal(os.Interrupt)
	select {
	case <-dm.exited:
	case <-time.After(15 * time.Second):
		_ = dm.cmd.Process.Kill()
		<-dm.exited
	}
}

// face is an MCP session on the daemon's face, with what every context
// in code mode starts with.
type face struct {
	c            *conn
	toolsJSON    string
	instructions string
}

func (dm *daemon) face(ctx context.Context, tenant string) (*face, error) {
	c, err := dialFace(ctx, endpoint.MCPSocket(dm.socket), tenant)
	if err != nil {
		return nil, err
	}
	tools, err := c.tools(ctx)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("face tools/list: %w", err)
	}
	all, _ := json.Marshal(tools)
	return &face{c: c, toolsJSON: string(all), instructions: c.instructions}, nil
}

func (f *face) close() { f.c.close() }

func (f *face) begin(tr *trajectory, prompt string) {
	tr.add("system", f.toolsJSON)
	if f.instructions != "" {
		tr.add("system", f.instructions)
	}
	tr.add("user", prompt)
}

// directSet is the servers a direct agent connects to, one session each.
type directSet struct {
	conns   map[string]*conn
	servers []server
	tools   map[string][]json.RawMessage
}

func dialDirect(ctx context.Context, dir string, d *data, servers []server) (*directSet, error) {
	s := &directSet{conns: map[string]*conn{}, servers: servers, tools: map[string][]json.RawMessage{}}
	for _, srv := range servers {
		var env []string
		if srv.memory {
			p, err := d.memoryFile(dir, "memory-direct.jsonl")
			if err != nil {
				return nil, err
			}
			env = []string{"MEMORY_FILE_PATH=" + p}
		}
		c, err := dialStdio(ctx, env, srv.command, srv.args...)
		if err != nil {
			s.close()
			return nil, err
		}
		s.conns[srv.name] = c
		if s.tools[srv.name], err = c.tools(ctx); err != nil {
			s.close()
			return nil, fmt.Errorf("%s tools/list: %w", srv.name, err)
		}
	}
	return s, nil
}

func (s *directSet) close() {
	for _, c := range s.conns {
		c.close()
	}
}

// begin puts what a host gives the model into tr: every tool definition
// of every server the task's tenant connects, and their instructions.
func (s *directSet) begin(_ context.Context, tr *trajectory, t task) error {
	var all []json.RawMessage
	var instructions []string
	for _, srv := range s.servers {
		if srv.tenant != t.tenant {
			continue
		}
		all = append(all, s.tools[srv.name]...)
		if in := s.conns[srv.name].instructions; in != "" {
			instructions = append(instructions, in)
		}
	}
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	tr.add("system", string(b))
	if len(instructions) > 0 {
		tr.add("system", strings.Join(instructions, "\n\n"))
	}
	tr.add("user", t.prompt)
	return nil
}
