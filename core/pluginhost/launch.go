package pluginhost

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/telemetry"
	"github.com/cexec/cexec/internal/tailbuf"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/selector"
)

// instance is one running, configured plugin process.
type instance struct {
	client *goplugin.Client
	conn   *grpc.ClientConn
	// impl is the dispensed gRPC client; it implements the kind's
	// interface (checked at launch).
	impl       pluginapi.Base
	info       pluginapi.Info
	apiVersion string
	pid        int
	// cmd is the plugin's command; its ProcessState says how the process
	// ended once client.Exited is true.
	cmd     *exec.Cmd
	started time.Time
	// exited is closed by the supervisor once the process is gone.
	exited chan struct{}
	// unimplemented holds the optional hooks (hook* bits) this process
	// answered with pluginapi.ErrUnimplemented: its configuration cannot
	// change while it runs, so they are not asked again (a round trip
	// each) until a restart starts a new instance.
	unimplemented atomic.Uint32
}

// hostAPIVersions lists, per kind, the API versions this host speaks.
var hostAPIVersions = map[pluginapi.Kind][]string{
	pluginapi.KindSelector: {selector.APIVersion},
	pluginapi.KindCodegen:  {codegen.APIVersion},
	pluginapi.KindGuard:    {guard.APIVersion},
	pluginapi.KindSandbox:  {sandbox.APIVersion},
}

// pluginSet is the go-plugin dispense table for one kind.
func pluginSet(kind pluginapi.Kind) (goplugin.PluginSet, error) {
	var p goplugin.Plugin
	switch kind {
	case pluginapi.KindSelector:
		p = &selector.GRPCPlugin{}
	case pluginapi.KindCodegen:
		p = &codegen.GRPCPlugin{}
	case pluginapi.KindGuard:
		p = &guard.GRPCPlugin{}
	case pluginapi.KindSandbox:
		p = &sandbox.GRPCPlugin{}
	default:
		return nil, fmt.Errorf("unknown plugin kind %q", kind)
	}
	return goplugin.PluginSet{string(kind): p}, nil
}

// implementsKind reports whether a dispensed client implements kind's
// interface.
func implementsKind(kind pluginapi.Kind, raw any) bool {
	switch kind {
	case pluginapi.KindSelector:
		_, ok := raw.(selector.Selector)
		return ok
	case pluginapi.KindCodegen:
		_, ok := raw.(codegen.Codegen)
		return ok
	case pluginapi.KindGuard:
		_, ok := raw.(guard.Guard)
		return ok
	case pluginapi.KindSandbox:
		_, ok := raw.(sandbox.Sandbox)
		return ok
	}
	return false
}

// pluginLogger keeps a plugin's re-logged stderr under "kind.name"; go-plugin
// would otherwise add the executable's file name to the logger's name. It
// also masks the config's secrets (config.Config.Secrets): a plugin given a
// key may log it, or an error that quotes it, and env() values must never
// reach cexecd's log.
type pluginLogger struct {
	hclog.Logger
	mask *secretMask
}

// secretMask is the current mask of the config's secrets. It changes
// once the plugin's block is decoded: env() values inside a plugin block
// are only evaluated then, against the schema the plugin declares.
type secretMask struct {
	m atomic.Pointer[config.SecretMask] // nil when there is nothing to mask
}

// set masks secrets from now on.
func (m *secretMask) set(secrets []string) { m.m.Store(config.NewSecretMask(secrets)) }

// replace masks s.
func (m *secretMask) replace(s string) string {
	if m == nil {
		return s
	}
	return m.m.Load().Replace(s)
}

// Named returns the logger unchanged.
func (l pluginLogger) Named(string) hclog.Logger { return l }

// Log and the level methods are what go-plugin re-logs the plugin's lines
// with.
func (l pluginLogger) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, l.str(msg), l.args(args)...)
}
func (l pluginLogger) Trace(msg string, args ...any) { l.Logger.Trace(l.str(msg), l.args(args)...) }
func (l pluginLogger) Debug(msg string, args ...any) { l.Logger.Debug(l.str(msg), l.args(args)...) }
func (l pluginLogger) Info(msg string, args ...any)  { l.Logger.Info(l.str(msg), l.args(args)...) }
func (l pluginLogger) Warn(msg string, args ...any)  { l.Logger.Warn(l.str(msg), l.args(args)...) }
func (l pluginLogger) Error(msg string, args ...any) { l.Logger.Error(l.str(msg), l.args(args)...) }

func (l pluginLogger) str(s string) string { return l.mask.replace(s) }

// args masks the values of key-value pairs; one that is not a string (a
// JSON object or list from the plugin's line) is replaced by its masked
// text only when it held a secret.
func (l pluginLogger) args(args []any) []any {
	if l.mask == nil || l.mask.m.Load() == nil {
		return args
	}
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = l.mask.replace(v)
		case nil, bool, int, int64, float64:
			out[i] = v
		default:
			text := fmt.Sprint(v)
			if masked := l.mask.replace(text); masked != text {
				out[i] = masked
			} else {
				out[i] = v
			}
		}
	}
	return out
}

// newClient prepares the go-plugin client for the binary at path.
// stderr, when not nil, also receives the plugin's raw stderr.
// The command is returned too: once started, its pid leads the plugin's
// process group (killGroup).
func newClient(p *config.Plugin, path string, timeout time.Duration, log hclog.Logger, mask *secretMask, stderr io.Writer) (*goplugin.Client, *exec.Cmd, error) {
	set, err := pluginSet(p.Kind)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(path, p.Args...)
	// cexec.hcl's relative paths are relative to its directory; a plugin
	// resolves the ones in its block (rules_dir, cache_dir, python) itself.
	if f := p.DeclRange.Filename; filepath.IsAbs(f) {
		cmd.Dir = filepath.Dir(f)
	}
	cmd.Env = pluginEnv(p.Env, log.GetLevel())
	setProcAttr(cmd)
	cc := &goplugin.ClientConfig{
		HandshakeConfig:  pluginapi.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{pluginapi.ProtocolVersion: set},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		// go-plugin appends os.Environ() to cmd.Env unless told not to;
		// the plugin must see only what pluginEnv chose.
		SkipHostEnv:     true,
		StartTimeout:    timeout,
		Logger:          pluginLogger{Logger: log, mask: mask},
		Stderr:          stderr,
		GRPCDialOptions: dialOptions(string(p.Kind), p.Name),
	}
	if h := telemetry.GRPCClientHandler(); h != nil {
		cc.GRPCDialOptions = append(cc.GRPCDialOptions, grpc.WithStatsHandler(h))
	}
	if len(p.SHA256Bytes) > 0 {
		// Checked again by go-plugin right before exec, narrowing the
		// window in which the file could be swapped after CheckBinary.
		cc.SecureConfig = &goplugin.SecureConfig{Checksum: p.SHA256Bytes, Hash: sha256.New()}
	}
	return goplugin.NewClient(cc), cmd, nil
}

// launch starts one plugin process and brings it to the configured state:
// handshake, Info, API version, config decoded against the declared schema,
// Configure. On error diagnostics nothing is left running. The process start
// is bounded by the plugin's timeout rather than ctx, because go-plugin's
// handshake cannot be interrupted.
func launch(ctx context.Context, hostCfg *config.Config, p *config.Plugin, log hclog.Logger) (*instance, hcl.Diagnostics) {
	kind := p.Kind
	id := key(kind, p.Name)
	fail := func(summary string, err error) (*instance, hcl.Diagnostics) {
		return nil, startFailed(p, summary, err)
	}
	if err := ctx.Err(); err != nil {
		return fail("Plugin not started", err)
	}

	// Load checked the binary already; the file may have changed since.
	path, diags := p.CheckBinary()
	if diags.HasErrors() {
		return nil, diags
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	stderr := tailbuf.New(1024)
	mask := &secretMask{}
	mask.set(hostCfg.Secrets())
	client, cmd, err := newClient(p, path, timeout, log, mask, stderr)
	if err != nil {
		return fail("Unknown plugin kind", err)
	}
	// Kill waits for the plugin's pipes to close, so whatever the plugin
	// started goes first.
	kill := func() {
		if cmd.Process != nil {
			killGroup(cmd.Process.Pid)
		}
		client.Kill()
	}
	launched := false
	defer func() {
		if !launched {
			kill()
		}
	}()

	rpc, err := client.Client()
	if err != nil {
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Plugin binary checksum mismatch",
				Detail:   fmt.Sprintf("start plugin %s: the sha256 of %s is not %s; the binary was not run.", id, path, p.SHA256),
				Subject:  p.AttributeRange("sha256").Ptr(),
			}}
		}
		// Kill waits until go-plugin has read all of stderr.
		kill()
		return fail("Plugin failed to start", startError(err, mask.replace(stderr.String()), timeout))
	}
	gc, isGRPC := rpc.(*goplugin.GRPCClient)
	if !isGRPC {
		return fail("Plugin failed to start", fmt.Errorf("plugin does not speak gRPC"))
	}
	raw, err := rpc.Dispense(string(kind))
	if err != nil {
		return fail("Plugin failed to start", fmt.Errorf("dispense %s: %w", kind, err))
	}
	base, isBase := raw.(pluginapi.Base)
	if !isBase || !implementsKind(kind, raw) {
		return fail("Plugin failed to start", fmt.Errorf("dispensed %T does not implement the %s interface", raw, kind))
	}
	pid, _ := strconv.Atoi(client.ID())

	info, apiVersion, diags := configure(ctx, p, base, path, timeout, diags, configureHooks{
		served:  func(ctx context.Context) pluginapi.Kind { return servedKind(ctx, gc.Conn) },
		decoded: func() { mask.set(hostCfg.Secrets()) },
	})
	if diags.HasErrors() {
		return nil, diags
	}

	log.Debug("plugin configured", "path", path, "pid", pid, "plugin_name", info.Name, "version", info.Version, "api", apiVersion)
	launched = true
	go reapGroup(client, pid)
	return &instance{
		client:     client,
		conn:       gc.Conn,
		impl:       base,
		info:       info,
		apiVersion: apiVersion,
		pid:        pid,
		cmd:        cmd,
		started:    time.Now(),
		exited:     make(chan struct{}),
	}, diags
}

// reapGroup ends the rest of a plugin's process group once the plugin
// itself has exited: go-plugin reaps the plugin, and so reports it gone
// (Exited), only after its stdout and stderr close, which a child of the
// plugin holding them would otherwise put off for as long as it lives. It
// returns once the plugin is reaped. It polls only once the plugin has
// exited: polling while it lives would wake an idle daemon 20 times a
// second per plugin.
func reapGroup(client *goplugin.Client, pid int) {
	const tick = 50 * time.Millisecond
	waitProcessExit(pid)
	for !client.Exited() {
		if exitedUnreaped(pid) {
			killGroup(pid)
		}
		time.Sleep(tick)
	}
}

// StartError is the Extra of a diagnostic about a plugin that could not be
// started for a reason other than what its block says (its process died,
// a call to it failed, it is another kind or speaks another API version),
// so that the daemon can say that rather than "invalid configuration".
type StartError struct {
	// Plugin is "kind.name".
	Plugin string
	Err    error
}

func (e *StartError) Error() string {
	return "plugin " + e.Plugin + " failed to start: " + e.Err.Error()
}

func (e *StartError) Unwrap() error { return e.Err }

// startFailed is the diagnostic of a plugin that could not be started.
func startFailed(p *config.Plugin, summary string, err error) hcl.Diagnostics {
	id := key(p.Kind, p.Name)
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf("start plugin %s: %v", id, err),
		Subject:  p.DeclRange.Ptr(),
		Extra:    &StartError{Plugin: id, Err: err},
	}}
}

// configure brings a dispensed plugin to its configured state: its Info and
// API version checked, its block decoded against the schema it declares,
// Configure called. diags are the launch's so far and come back with what
// configuring adds; a failed call returns its error alone.
// configureHooks are launch's parts of configure; either may be nil.
type configureHooks struct {
	// served tells the kind a plugin that answers Info for none really is.
	served func(context.Context) pluginapi.Kind
	// decoded runs once the block is decoded, before Configure: its env()
	// values are known from then on.
	decoded func()
}

func configure(ctx context.Context, p *config.Plugin, base pluginapi.Base, path string, timeout time.Duration, diags hcl.Diagnostics, hooks configureHooks) (pluginapi.Info, string, hcl.Diagnostics) {
	kind := p.Kind
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := base.Info(ctx)
	if err != nil {
		// A plugin of another kind serves another gRPC service; say which,
		// rather than gRPC's "unknown service".
		if status.Code(err) == codes.Unimplemented && hooks.served != nil {
			if other := hooks.served(ctx); other != "" {
				return info, "", startFailed(p, "Plugin kind mismatch", fmt.Errorf("%s is a %s plugin, but cexec.hcl configures it as plugin %q %q; fix the block's kind or its command", path, other, kind, p.Name))
			}
		}
		return info, "", startFailed(p, "Plugin Info failed", err)
	}
	if info.Kind != kind {
		return info, "", startFailed(p, "Plugin kind mismatch", fmt.Errorf("%s reports kind %q, but cexec.hcl configures it as %q", path, info.Kind, kind))
	}
	apiVersion, found := pluginapi.NegotiateAPIVersion(hostAPIVersions[kind], info.APIVersions)
	if !found {
		return info, "", startFailed(p, "No common plugin API version", fmt.Errorf("plugin %s %s speaks %s API versions [%s]; this cexecd speaks [%s]",
			info.Name, info.Version, kind, strings.Join(info.APIVersions, ", "), strings.Join(hostAPIVersions[kind], ", ")))
	}
	body, bdiags := config.DecodePluginBody(p, info.ConfigSchema)
	diags = append(diags, bdiags...)
	if diags.HasErrors() {
		return info, apiVersion, diags
	}
	if hooks.decoded != nil {
		hooks.decoded()
	}
	pdiags, err := base.Configure(ctx, body, apiVersion)
	if err != nil {
		return info, apiVersion, startFailed(p, "Plugin Configure failed", err)
	}
	return info, apiVersion, append(diags, configureDiags(p, key(kind, p.Name), pdiags)...)
}

// servedKind returns the kind whose Info answers on conn, or "" when none
// does: what a binary configured as another kind really is.
func servedKind(ctx context.Context, conn *grpc.ClientConn) pluginapi.Kind {
	for _, k := range pluginapi.Kinds {
		set, err := pluginSet(k)
		if err != nil {
			continue
		}
		raw, err := set[string(k)].(goplugin.GRPCPlugin).GRPCClient(ctx, nil, conn)
		if err != nil {
			continue
		}
		if b, ok := raw.(pluginapi.Base); ok {
			if info, err := b.Info(ctx); err == nil && info.Kind == k {
				return k
			}
		}
	}
	return ""
}

// Handshake failures as go-plugin words them; startError explains them.
var (
	reGoPluginProtocol = regexp.MustCompile(`^incompatible API version with plugin\. Plugin version: (\d+)`)
	reGoPluginCore     = regexp.MustCompile(`^incompatible core API version with plugin\. Plugin version: (\S+), Core version: (\d+)`)
)

// startError turns go-plugin's multi-line handshake errors into one line
// that says what to do, and adds the end of what the plugin wrote to
// stderr, which usually says why it died (go-plugin logs unstructured
// stderr only at debug level).
func startError(err error, stderr string, timeout time.Duration) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if rest, ok := strings.CutPrefix(strings.TrimSpace(msg), "Unrecognized remote plugin message:"); ok {
		if rest = strings.TrimSpace(rest); rest == "" {
			msg = "the plugin ended its output before the go-plugin handshake (is it a cexec plugin?)"
		} else {
			msg = fmt.Sprintf("the plugin wrote %q on stdout, where the go-plugin handshake belongs (is it a cexec plugin? a plugin logs only to stderr, with pluginapi.Logger)", rest)
		}
	} else if m := reGoPluginProtocol.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("the plugin speaks cexec plugin protocol version %s and this cexecd speaks %d (pluginapi.ProtocolVersion); rebuild the plugin against this cexecd's pluginapi, or run the cexecd it was built for", m[1], pluginapi.ProtocolVersion)
	} else if m := reGoPluginCore.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("the plugin speaks go-plugin core protocol %s and this cexecd speaks %s; the plugin usually only needs to be recompiled with a current hashicorp/go-plugin", m[1], m[2])
	} else if msg == "timeout while waiting for plugin to start" {
		msg = fmt.Sprintf("no go-plugin handshake within the plugin's timeout of %s; raise timeout in its block if it starts slowly, or check that command is a cexec plugin", timeout)
	}
	if stderr = strings.TrimSpace(stderr); stderr != "" {
		return fmt.Errorf("%s; its stderr ended with: %s", msg, stderr)
	}
	return errors.New(msg)
}

// configureDiags places the plugin's Configure diagnostics in cexec.hcl: at
// the attribute they name, else at the plugin block.
func configureDiags(p *config.Plugin, id string, in pluginapi.Diagnostics) hcl.Diagnostics {
	out := make(hcl.Diagnostics, 0, len(in))
	for _, d := range in {
		sev := hcl.DiagError
		if d.Severity == pluginapi.SeverityWarning {
			sev = hcl.DiagWarning
		}
		// AttributeRange falls back to the enclosing block, then to the
		// plugin block, for paths it cannot find.
		subject := p.AttributeRange(d.Attribute)
		detail := fmt.Sprintf("reported by plugin %s", id)
		if d.Detail != "" {
			detail = fmt.Sprintf("%s (%s)", d.Detail, detail)
		}
		out = append(out, &hcl.Diagnostic{
			Severity: sev,
			Summary:  d.Summary,
			Detail:   detail,
			Subject:  subject.Ptr(),
		})
	}
	return out
}
