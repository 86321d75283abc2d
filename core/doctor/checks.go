package doctor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/internal/bytesize"
	"github.com/cexec/cexec/pluginapi"
)

// Run runs every check that applies to cfg.
func Run(ctx context.Context, cfg *config.Config, o Options) []Check {
	o.defaults()
	var out []Check
	if bw := cfg.Plugin(pluginapi.KindSandbox, "bwrap"); bw != nil {
		attrs := literalAttrs(bw.Body, "bwrap", "python")
		bwrap := attrs["bwrap"]
		if bwrap == "" {
			bwrap = "bwrap"
		}
		python := attrs["python"]
		if python == "" {
			python = "/usr/bin/python3"
		}
		out = append(out, checkBwrap(ctx, &o, bwrap)...)
		out = append(out, checkSeccomp(), checkCgroups(&o), checkPython(&o, python))
	}
	out = append(out, checkPlugins(cfg)...)
	out = append(out, checkServers(ctx, cfg, &o)...)
	out = append(out, checkSocketDir(cfg.Daemon.Socket), checkDataDir(cfg.Daemon.DataDir))
	return out
}

// literalAttrs reads the named string attributes of a plugin block that
// are literals (the doctor evaluates nothing).
func literalAttrs(body hcl.Body, names ...string) map[string]string {
	out := map[string]string{}
	if body == nil {
		return out
	}
	schema := &hcl.BodySchema{}
	for _, n := range names {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: n})
	}
	content, _, _ := body.PartialContent(schema)
	for n, a := range content.Attributes {
		if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type().FriendlyName() == "string" {
			out[n] = v.AsString()
		}
	}
	return out
}

const installBwrap = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or set bwrap = \"/path/to/bwrap\" in plugin \"sandbox\" \"bwrap\""

// checkBwrap finds bubblewrap and runs it as the sandbox will need:
// first plainly, then in a new user namespace.
func checkBwrap(ctx context.Context, o *Options, bwrap string) []Check {
	path, err := o.lookPath(bwrap)
	if err != nil {
		return []Check{fail("bubblewrap", fmt.Sprintf("%s not found in PATH (%s): the bwrap sandbox backend cannot start sandboxes", bwrap, o.Path), installBwrap)}
	}
	out := []Check{}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		b, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	if msg, err := run("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--", "/bin/true"); err != nil {
		out = append(out, fail("bubblewrap", fmt.Sprintf("%s cannot create a sandbox: %v %s", path, err, msg),
			"run cexecd as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0)"))
	} else {
		out = append(out, ok("bubblewrap", path+" creates sandboxes"))
	}
	if msg, err := run("--unshare-user", "--ro-bind", "/", "/", "--", "/bin/true"); err != nil {
		out = append(out, warn("user namespaces", fmt.Sprintf("bwrap --unshare-user fails: %v %s", err, msg),
			"cexecd as root does not need them; without root enable them: sysctl user.max_user_namespaces=15000 and kernel.unprivileged_userns_clone=1"))
	} else {
		out = append(out, ok("user namespaces", "available"))
	}
	return out
}

// checkSeccomp asks the kernel whether seccomp filters are available: the
// bwrap plugin installs one in every sandbox.
func checkSeccomp() Check {
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fail("seccomp", "the kernel does not support seccomp ("+err.Error()+")", "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER (every distribution kernel is)")
	}
	return ok("seccomp", "available")
}

// checkCgroups reports the cgroup version and whether the controllers the
// sandbox limits use (memory, pids, cpu) are there and writable where the
// sandboxes' cgroups go: under cexecd's own cgroup on v2, the controllers'
// hierarchies on v1 (the bwrap plugin uses either).
func checkCgroups(o *Options) Check {
	const name = "cgroups"
	want := []string{"memory", "pids", "cpu"}
	if b, err := os.ReadFile(filepath.Join(o.CgroupRoot, "cgroup.controllers")); err == nil {
		own := filepath.Join(o.CgroupRoot, ownCgroup(o.ProcRoot))
		if ob, err := os.ReadFile(filepath.Join(own, "cgroup.controllers")); err == nil {
			b = ob
		}
		have := strings.Fields(string(b))
		if missing := absent(want, have); len(missing) > 0 {
			return warn(name, "cgroup v2 without the "+strings.Join(missing, ", ")+" controller(s) in "+own+": those limits are not enforced",
				"enable the controllers in the parent's cgroup.subtree_control, or run cexecd under systemd with Delegate=yes (cexecd.service sets it)")
		}
		if unix.Access(own, unix.W_OK) != nil {
			return warn(name, "cgroup v2 ("+strings.Join(have, " ")+"), but "+own+" is not writable by this user",
				"run cexecd as root or under systemd with Delegate=yes, or set cgroup_parent in plugin \"sandbox\" \"bwrap\" to a delegated cgroup")
		}
		return ok(name, "cgroup v2, "+own+" holds: "+strings.Join(have, " "))
	}
	var have, ro []string
	for _, c := range want {
		dir := filepath.Join(o.CgroupRoot, c)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		have = append(have, c)
		if unix.Access(dir, unix.W_OK) != nil {
			ro = append(ro, c)
		}
	}
	switch {
	case len(have) == 0:
		return warn(name, "no cgroup hierarchy at "+o.CgroupRoot+": sandboxes get rlimits only (no memory cgroup, no pids limit)",
			"mount cgroup v2 at /sys/fs/cgroup (every systemd distribution does), or run cexecd where cgroups are available")
	case len(ro) > 0:
		return warn(name, "cgroup v1, but "+strings.Join(ro, ", ")+" not writable by this user", "run cexecd as root")
	case len(absent(want, have)) > 0:
		return warn(name, "cgroup v1 without "+strings.Join(absent(want, have), ", ")+": those limits are not enforced", "mount the missing controllers, or boot with cgroup v2")
	}
	return ok(name, "cgroup v1, controllers: "+strings.Join(have, " "))
}

// ownCgroup is this process's cgroup v2 path ("0::/path"), "/" when unknown.
func ownCgroup(procRoot string) string {
	b, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return "/"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return "/"
}

func absent(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// checkPython requires the sandbox's interpreter to be a real executable,
// not a script (a pyenv shim would not run inside the sandbox).
func checkPython(o *Options, python string) Check {
	const name = "python"
	fix := "install python3 (apt-get install python3), or set python = \"/usr/bin/python3\" in plugin \"sandbox\" \"bwrap\" to a real interpreter, not a shim"
	p, err := o.lookPath(python)
	if err != nil {
		return fail(name, python+" not found", fix)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fail(name, err.Error(), fix)
	}
	f, err := os.Open(real)
	if err != nil {
		return fail(name, err.Error(), fix)
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil || string(head) != "\x7fELF" {
		return fail(name, real+" is not an executable binary (a script or shim?)", fix)
	}
	return ok(name, real)
}

// checkPlugins verifies every plugin binary: present, executable, and its
// sha256, which is reported so it can be pinned.
func checkPlugins(cfg *config.Config) []Check {
	var out []Check
	for _, p := range cfg.Plugins {
		name := "plugin " + p.Key()
		path := p.ResolvedCommand()
		if path == "" {
			path = filepath.Join(p.PluginDir(), p.Command)
		}
		sum, err := fileSHA256(path)
		switch {
		case err != nil:
			out = append(out, fail(name, err.Error(), "build the plugins (make build) and install them into plugin_dir ("+p.PluginDir()+"), or fix command"))
		case p.SHA256 != "" && !strings.EqualFold(p.SHA256, sum):
			out = append(out, fail(name, fmt.Sprintf("%s has sha256 %s, the config pins %s", path, sum, p.SHA256),
				"reinstall the plugin the config pins, or update sha256 after checking the new binary"))
		case p.SHA256 == "":
			out = append(out, Check{Name: name, Status: OK, Detail: path + " sha256 " + sum + " (not pinned: add sha256 = \"" + sum + "\" to pin it)"})
		default:
			out = append(out, ok(name, path+" sha256 "+sum+" (pinned)"))
		}
	}
	return out
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not executable", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkServers finds each stdio server's command (node and npx above all)
// and dials each remote server's address; built-in servers run in cexecd
// and need nothing.
func checkServers(ctx context.Context, cfg *config.Config, o *Options) []Check {
	var out []Check
	for _, s := range cfg.MCPServers {
		name := "mcp_server " + s.Name
		if c, done := ctxDone(ctx, name); done {
			out = append(out, c)
			continue
		}
		if s.Transport == config.TransportBuiltin {
			out = append(out, ok(name, "built into cexecd"))
			continue
		}
		sev := fail
		if s.Optional {
			sev = warn
		}
		if s.Command != "" {
			lookup := *o
			if p, ok := s.Env["PATH"]; ok {
				lookup.Path = p
			}
			p, err := lookup.lookPath(s.Command)
			if err != nil {
				fix := "install " + s.Command + " or give its full path in command"
				if s.Command == "npx" || s.Command == "node" || s.Command == "npm" {
					fix = "install Node.js and npm (apt-get install nodejs npm): " + s.Command + " runs this server"
				}
				out = append(out, sev(name, s.Command+" not found in PATH", fix))
				continue
			}
			out = append(out, ok(name, "command "+p))
			continue
		}
		out = append(out, dialServer(ctx, name, s.URL, sev))
	}
	return out
}

func dialServer(ctx context.Context, name, raw string, sev func(string, string, string) Check) Check {
	u, err := url.Parse(raw)
	if err != nil {
		return sev(name, err.Error(), "fix url")
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return sev(name, "cannot reach "+host+": "+err.Error(), "start the server or fix its url; check DNS, firewalls and proxies between this host and it")
	}
	_ = c.Close()
	return ok(name, "reachable at "+host)
}

// checkSocketDir wants the control socket's folder private: whoever can
// write it can replace the socket.
func checkSocketDir(sock string) Check {
	const name = "socket directory"
	dir := filepath.Dir(sock)
	fi, err := os.Stat(dir)
	if os.IsNotExist(err) {
		return ok(name, dir+" does not exist yet; cexecd creates it 0700")
	}
	if err != nil {
		return fail(name, err.Error(), "make "+dir+" reachable by cexecd's user")
	}
	if !fi.IsDir() {
		return fail(name, dir+" is not a directory", "choose another socket path (cexec.socket)")
	}
	st, _ := fi.Sys().(*unix.Stat_t)
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return fail(name, fmt.Sprintf("%s is writable by others (%v): another user could replace the socket", dir, fi.Mode().Perm()),
			"chmod go-w "+dir+", or put the socket in a private folder such as /run/cexec (RuntimeDirectory=cexec)")
	}
	if st != nil && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return warn(name, fmt.Sprintf("%s is owned by uid %d, not cexecd's user (%d)", dir, st.Uid, os.Geteuid()), "chown the folder to the user cexecd runs as")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		// cexecd's own rule for the MCP socket beside the control socket
		// (core/daemon ownerOnly): agents reach it without a token.
		return warn(name, fmt.Sprintf("%s has mode %04o: cexecd does not serve MCP on its unix socket (cexecctl mcp) unless the folder is 0700", dir, fi.Mode().Perm()),
			"chmod 700 "+dir+" and restart cexecd (under systemd: RuntimeDirectoryMode=0700)")
	}
	return ok(name, fmt.Sprintf("%s (%04o)", dir, fi.Mode().Perm()))
}

// checkDataDir reports data_dir's free space and inodes (of the nearest
// existing folder when it does not exist yet).
func checkDataDir(dir string) Check {
	const name = "data_dir"
	p := dir
	for {
		if _, err := os.Stat(p); err == nil {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fail(name, err.Error(), "create "+dir+" or choose another data_dir")
	}
	if unix.Access(p, unix.W_OK) != nil {
		return fail(name, p+" is not writable by this user", "chown "+dir+" to cexecd's user, or set data_dir (StateDirectory=cexec gives /var/lib/cexec)")
	}
	free := int64(st.Bavail) * st.Bsize
	total := int64(st.Blocks) * st.Bsize
	detail := fmt.Sprintf("%s: %s free of %s, %d of %d inodes free", dir, bytesize.Format(free), bytesize.Format(total), st.Ffree, st.Files)
	const fix = "free space on the file system holding data_dir, or move data_dir; each tenant's image takes up to its disk_quota"
	switch {
	case free < 1<<30 || (total > 0 && free*20 < total):
		return warn(name, detail+": less than 1 GiB or 5% free", fix)
	case st.Files > 0 && st.Ffree*20 < st.Files:
		return warn(name, detail+": less than 5% of inodes free", fix)
	}
	return ok(name, detail)
}
