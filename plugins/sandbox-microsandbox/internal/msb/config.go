package msb

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// Config is the plugin's block in cexec.hcl, as the host decodes it against
// configSchema.
type Config struct {
	API          string   `json:"api"`
	MSB          string   `json:"msb"`
	MSBHome      string   `json:"msb_home"`
	Image        string   `json:"image"`
	Python       string   `json:"python"`
	CPUs         int64    `json:"cpus"`
	MemoryMB     int64    `json:"memory_mb"`
	TmpMB        int64    `json:"tmp_mb"`
	AllowNetwork bool     `json:"allow_network"`
	ExecTimeout  string   `json:"exec_timeout"`
	BootTimeout  string   `json:"boot_timeout"`
	OutputKB     int64    `json:"output_kb"`
	Preload      []string `json:"preload"`
	PIDNamespace *bool    `json:"pid_namespace"`

	URL           string `json:"url"`
	APIKey        string `json:"api_key"`
	AcceptNetwork bool   `json:"accept_network"`
	GuestDir      string `json:"guest_dir"`
	ServerExec    string `json:"server_exec"`
}

// API modes.
const (
	apiCLI    = "cli"
	apiServer = "server"
)

// Ways to run programs in server mode.
const (
	serverExecRelay = "relay"
	serverExecREPL  = "repl"
)

// Defaults of Config.
const (
	defaultMSB         = "msb"
	defaultCLIImage    = "python:3.12-slim"
	defaultCLIPython   = "/usr/local/bin/python3"
	defaultServerImage = "microsandbox/python"
	defaultServerPy    = "python3"
	defaultCPUs        = 1
	defaultMemoryMB    = 512
	minMemoryMB        = 128
	defaultTmpMB       = 64
	defaultExecTimeout = 30 * time.Second
	defaultBootTimeout = 5 * time.Minute
	defaultOutputKB    = 1024
	defaultGuestDir    = "/tmp/cexec"
)

var configSchema = pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
	{Name: "api", Type: "string", Description: "\"cli\" (default) drives the msb 0.7 command-line tool on this machine; \"server\" talks JSON-RPC to a 0.2-era `msb server` at url."},
	{Name: "msb", Type: "string", Description: "CLI mode: the msb binary, a path or a name looked up in PATH. Default msb."},
	{Name: "msb_home", Type: "string", Description: "CLI mode: msb's state directory (MSB_HOME). Default: msb's own, ~/.microsandbox."},
	{Name: "image", Type: "string", Description: "OCI image sandboxes boot; it must contain Python 3.9 or newer. Default python:3.12-slim (CLI) or microsandbox/python (server)."},
	{Name: "python", Type: "string", Description: "The interpreter inside the image. Default /usr/local/bin/python3 (CLI, the python images) or python3 (server)."},
	{Name: "cpus", Type: "number", Description: "vCPUs of each microVM; a sandbox's CPU limit, when set, is rounded up to whole vCPUs. Default 1."},
	{Name: "memory_mb", Type: "number", Description: "Memory of each microVM in MiB when the sandbox limits set none; the VM is the memory limit. Default 512, at least 128."},
	{Name: "tmp_mb", Type: "number", Description: "CLI mode: size of the guest's /tmp tmpfs in MiB when the sandbox limits set none. Default 64."},
	{Name: "allow_network", Type: "bool", Description: "Let sandboxes that ask for network reach the public internet. Default false: microVMs boot with --no-net."},
	{Name: "exec_timeout", Type: "string", Description: "Default wall-clock limit of one execution, a Go duration. Default 30s."},
	{Name: "boot_timeout", Type: "string", Description: "How long creating a sandbox may take, including pulling the image the first time. Default 5m."},
	{Name: "output_kb", Type: "number", Description: "Default cap on the stdout plus stderr of one execution in KiB. Default 1024."},
	{Name: "preload", Type: "list(string)", Description: "Python modules a warm sandbox imports before its first execution. Default: the runtime's list."},
	{Name: "pid_namespace", Type: "bool", Description: "CLI mode: run the runtime as init of its own pid namespace in the guest (unshare, as root), so that nothing a program starts outlives its execution. Falls back to a plain start where the image or kernel does not allow it. Default true."},
	{Name: "url", Type: "string", Description: "Server mode: base URL of the msb server, for example http://127.0.0.1:5555."},
	{Name: "api_key", Type: "string", Sensitive: true, Description: "Server mode: the server's API key (`msb server keygen`), sent as a Bearer token. Write env(\"MSB_API_KEY\")."},
	{Name: "accept_network", Type: "bool", Description: "Server mode: the 0.2 server gives every sandbox public network access and cannot turn it off; server mode is refused unless this is true."},
	{Name: "guest_dir", Type: "string", Description: "Server mode: directory inside the guest, writable by the image's user, where the runtime, tool stubs and skills are copied. Default /tmp/cexec."},
	{Name: "server_exec", Type: "string", Description: "Server mode: \"relay\" (default) runs the standard runtime with call_tool over sandbox.command.run; \"repl\" runs programs in the server's Python REPL (sandbox.repl.run), without call_tool or cexec.result."},
}}

var modulePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// settings is a validated Config.
type settings struct {
	api          string
	msb          string // as configured; resolved by the probe
	msbHome      string
	image        string
	python       string
	cpus         int64
	memoryMB     int64
	tmpMB        int64
	allowNetwork bool
	timeout      time.Duration
	bootTimeout  time.Duration
	output       int64
	preload      []string
	pidNamespace bool

	url           string
	apiKey        string
	acceptNetwork bool
	guestDir      string
	serverExec    string
}

// decodeConfig checks a Config. Problems come back as diagnostics that
// name the attribute; the api key never appears in them.
func decodeConfig(raw json.RawMessage) (*settings, pluginapi.Diagnostics) {
	var c Config
	if diags := pluginapi.DecodeConfig("sandbox-microsandbox", raw, &c); diags.HasErrors() {
		return nil, diags
	}
	var diags pluginapi.Diagnostics
	s := &settings{
		api:           c.API,
		msb:           c.MSB,
		msbHome:       c.MSBHome,
		image:         c.Image,
		python:        c.Python,
		cpus:          orDefault(c.CPUs, defaultCPUs),
		memoryMB:      orDefault(c.MemoryMB, defaultMemoryMB),
		tmpMB:         orDefault(c.TmpMB, defaultTmpMB),
		allowNetwork:  c.AllowNetwork,
		timeout:       defaultExecTimeout,
		bootTimeout:   defaultBootTimeout,
		output:        orDefault(c.OutputKB, defaultOutputKB) << 10,
		preload:       c.Preload,
		pidNamespace:  c.PIDNamespace == nil || *c.PIDNamespace,
		url:           strings.TrimRight(c.URL, "/"),
		apiKey:        c.APIKey,
		acceptNetwork: c.AcceptNetwork,
		guestDir:      c.GuestDir,
		serverExec:    c.ServerExec,
	}
	if s.api == "" {
		s.api = apiCLI
	}
	if s.msb == "" {
		s.msb = defaultMSB
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"cpus", c.CPUs}, {"memory_mb", c.MemoryMB}, {"tmp_mb", c.TmpMB}, {"output_kb", c.OutputKB}} {
		if n.v < 0 {
			diags = append(diags, pluginapi.Errorf(n.name, "Invalid "+n.name, "must not be negative"))
		}
	}
	if c.MemoryMB > 0 && c.MemoryMB < minMemoryMB {
		diags = append(diags, pluginapi.Errorf("memory_mb", "Invalid memory_mb", fmt.Sprintf("a microVM needs at least %d MiB", minMemoryMB)))
	}
	for _, d := range []struct {
		name, v string
		dst     *time.Duration
	}{{"exec_timeout", c.ExecTimeout, &s.timeout}, {"boot_timeout", c.BootTimeout, &s.bootTimeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			diags = append(diags, pluginapi.Errorf(d.name, "Invalid "+d.name, fmt.Sprintf("%q is not a positive duration such as \"30s\"", d.v)))
			continue
		}
		*d.dst = v
	}
	for _, m := range c.Preload {
		if !modulePattern.MatchString(m) {
			diags = append(diags, pluginapi.Errorf("preload", "Invalid preload module", fmt.Sprintf("%q is not a Python module name", m)))
		}
	}
	if s.python != "" && strings.ContainsAny(s.python, " \t\n'\"") {
		diags = append(diags, pluginapi.Errorf("python", "Invalid python", "name the interpreter as one path or command name, without arguments or quotes"))
	}
	diags = append(diags, s.checkMode(&c)...)
	return s, diags
}

// checkMode refuses attributes of the other mode and completes the
// settings of the chosen one.
func (s *settings) checkMode(c *Config) pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	serverOnly := []struct {
		name string
		set  bool
	}{{"url", c.URL != ""}, {"api_key", c.APIKey != ""}, {"accept_network", c.AcceptNetwork}, {"guest_dir", c.GuestDir != ""}, {"server_exec", c.ServerExec != ""}}
	cliOnly := []struct {
		name string
		set  bool
	}{{"msb", c.MSB != ""}, {"msb_home", c.MSBHome != ""}, {"tmp_mb", c.TmpMB != 0}, {"pid_namespace", c.PIDNamespace != nil}}
	switch s.api {
	case apiCLI:
		for _, a := range serverOnly {
			if a.set {
				diags = append(diags, pluginapi.Errorf(a.name, "Attribute of server mode", fmt.Sprintf("%s only applies with api = \"server\"", a.name)))
			}
		}
		if s.image == "" {
			s.image = defaultCLIImage
		}
		if s.python == "" {
			s.python = defaultCLIPython
		}
	case apiServer:
		for _, a := range cliOnly {
			if a.set {
				diags = append(diags, pluginapi.Errorf(a.name, "Attribute of CLI mode", fmt.Sprintf("%s only applies with api = \"cli\"", a.name)))
			}
		}
		diags = append(diags, s.checkServer()...)
	default:
		diags = append(diags, pluginapi.Errorf("api", "Invalid api", fmt.Sprintf("%q: use \"cli\" (msb 0.7) or \"server\" (a 0.2 msb server)", s.api)))
	}
	return diags
}

// checkServer validates and completes the server mode settings.
func (s *settings) checkServer() pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	if s.image == "" {
		s.image = defaultServerImage
	}
	if s.python == "" {
		s.python = defaultServerPy
	}
	if s.guestDir == "" {
		s.guestDir = defaultGuestDir
	}
	if s.serverExec == "" {
		s.serverExec = serverExecRelay
	}
	u, err := url.Parse(s.url)
	switch {
	case s.url == "":
		diags = append(diags, pluginapi.Errorf("url", "Missing url", "server mode needs the msb server's base URL, for example http://127.0.0.1:5555"))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		diags = append(diags, pluginapi.Errorf("url", "Invalid url", fmt.Sprintf("%q is not an http(s) URL", s.url)))
	case u.User != nil:
		diags = append(diags, pluginapi.Errorf("url", "Invalid url", "put credentials in api_key, not in the URL"))
	}
	if !s.acceptNetwork {
		diags = append(diags, pluginapi.Errorf("accept_network", "Server mode cannot turn networking off",
			"a 0.2 msb server gives every sandbox public network access and its API has no setting to turn it off; cexec runs code without network unless told otherwise, so set accept_network = true to use server mode anyway, or use api = \"cli\" with msb 0.7"))
	}
	if !path.IsAbs(s.guestDir) || path.Clean(s.guestDir) != s.guestDir || s.guestDir == "/" || strings.ContainsAny(s.guestDir, " '\"") {
		diags = append(diags, pluginapi.Errorf("guest_dir", "Invalid guest_dir", fmt.Sprintf("%q is not an absolute, clean path without spaces or quotes", s.guestDir)))
	}
	switch s.serverExec {
	case serverExecRelay, serverExecREPL:
	default:
		diags = append(diags, pluginapi.Errorf("server_exec", "Invalid server_exec", fmt.Sprintf("%q: use \"relay\" or \"repl\"", s.serverExec)))
	}
	return diags
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}
