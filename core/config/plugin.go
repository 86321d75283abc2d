package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/pluginapi"
)

// Plugin is one `plugin "<kind>" "<name>" { ... }` block.
type Plugin struct {
	Kind pluginapi.Kind
	Name string
	// Command is the binary as configured: a path inside plugin_dir,
	// defaulting to cexec-plugin-<kind>-<name>.
	Command string
	Args    []string
	// SHA256 is the expected hex digest of the binary, or "".
	SHA256 string
	// SHA256Bytes is SHA256 decoded (nil when unset or invalid), ready for
	// go-plugin's SecureConfig.
	SHA256Bytes []byte
	// Required plugins stop the daemon when they fail to load; others are
	// skipped with a warning.
	Required bool
	// Timeout bounds how long the host waits on the plugin: start-up,
	// handshake, and calls that carry no deadline of their own.
	Timeout time.Duration
	// Env is the plugin's whole environment: plugins do not inherit cexecd's,
	// so secrets reach only the plugins configured with them.
	Env map[string]string
	// Body is the plugin-specific rest of the block, decoded against the
	// plugin's own schema by DecodePluginBody.
	Body      hcl.Body
	DeclRange hcl.Range

	pluginDir string
	resolved  string
	ctx       *hcl.EvalContext
	// attrRanges holds the ranges of the host-level attributes (command,
	// sha256, ...) that are present.
	attrRanges map[string]hcl.Range
}

// Key identifies the plugin as "<kind>/<name>", the key of the schema map
// given to MaskedJSONWithSchemas.
func (p *Plugin) Key() string {
	return PluginKey(p.Kind, p.Name)
}

// PluginKey is the key of a plugin of that kind and name: "<kind>/<name>".
func PluginKey(kind pluginapi.Kind, name string) string {
	return string(kind) + "/" + name
}

// ResolvedCommand is the absolute real path of the plugin binary as checked
// by Load, or "" when the check failed (then Load reported why).
func (p *Plugin) ResolvedCommand() string {
	return p.resolved
}

// PluginDir is the directory the plugin's binary must live in.
func (p *Plugin) PluginDir() string {
	return p.pluginDir
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// validName reports whether s is usable as a plugin or mcp_server name: it
// becomes part of file names, so it is kept to 1-64 of [a-z0-9_-].
func validName(s string) bool {
	return nameRE.MatchString(s)
}

func (d *decoder) plugins(cfg *Config, raws []*rawPlugin) {
	seen := map[string]*Plugin{}
	for _, r := range raws {
		if !pluginapi.ValidKind(r.Kind) {
			kinds := make([]string, len(pluginapi.Kinds))
			for i, k := range pluginapi.Kinds {
				kinds[i] = strconv.Quote(string(k))
			}
			d.errorf(r.KindRange.Ptr(), "Unknown plugin kind", "%q is not a plugin kind; use one of %s.", r.Kind, strings.Join(kinds, ", "))
			continue
		}
		if !validName(r.Name) {
			d.errorf(r.NameRange.Ptr(), "Invalid plugin name", "Plugin names are 1-64 characters of a-z, 0-9, _ and -, starting with a letter or digit; got %q.", r.Name)
			continue
		}
		i := len(cfg.Plugins)
		base := path("plugins", strconv.Itoa(i))
		p := &Plugin{
			Kind:       pluginapi.Kind(r.Kind),
			Name:       r.Name,
			Command:    "cexec-plugin-" + r.Kind + "-" + r.Name,
			Required:   true,
			Timeout:    defaultPluginTimeout,
			Env:        map[string]string{},
			Body:       r.Body,
			DeclRange:  r.DeclRange,
			pluginDir:  cfg.Daemon.PluginDir,
			ctx:        d.ctx,
			attrRanges: map[string]hcl.Range{},
		}
		for name, a := range map[string]*hcl.Attribute{
			"command": r.Command, "args": r.Args, "sha256": r.SHA256,
			"required": r.Required, "timeout": r.Timeout, "env": r.Env,
		} {
			if a != nil {
				p.attrRanges[name] = a.Range
			}
		}
		if prev, dup := seen[p.Key()]; dup {
			d.errorf(r.DeclRange.Ptr(), "Duplicate plugin",
				"plugin %q %q is already configured at %s.", r.Kind, r.Name, prev.DeclRange)
			continue
		}
		seen[p.Key()] = p

		if s, marked, ok := d.str(r.Command, append(base, "command")); ok {
			if marked {
				d.errorf(r.Command.Expr.Range().Ptr(), "Sensitive plugin command", "command must not come from env(): the binary is part of the trusted configuration.")
			} else {
				p.Command = s
			}
		}
		if l, ok := d.strList(r.Args, append(base, "args")); ok {
			p.Args = l
		}
		if s, _, ok := d.str(r.SHA256, append(base, "sha256")); ok {
			p.SHA256 = s
			if b, err := hex.DecodeString(s); err == nil && len(b) == sha256.Size {
				p.SHA256Bytes = b
			}
		}
		if b, ok := d.boolean(r.Required, append(base, "required")); ok {
			p.Required = b
		}
		if t, ok := d.duration(r.Timeout, append(base, "timeout")); ok {
			p.Timeout = t
		}
		if m, ok := d.strMap(r.Env, append(base, "env")); ok {
			p.Env = m
		}

		resolved, diags := p.CheckBinary()
		if !p.Required {
			for _, diag := range diags {
				diag.Severity = hcl.DiagWarning
				diag.Detail += " The plugin is not required (required = false), so cexecd starts without it."
			}
		}
		d.diags = append(d.diags, diags...)
		if len(diags) == 0 {
			p.resolved = resolved
		}
		cfg.Plugins = append(cfg.Plugins, p)
	}
}

// rangeOf is the range of a host-level attribute, or the block's.
func (p *Plugin) rangeOf(attr string) *hcl.Range {
	if r, ok := p.attrRanges[attr]; ok {
		return r.Ptr()
	}
	return p.DeclRange.Ptr()
}

// CheckBinary resolves the plugin's command inside its plugin_dir and checks
// it: no "..", no absolute path or symlink that leads outside plugin_dir, an
// executable regular file, and the configured sha256 if any. It returns the
// binary's absolute real path. Load calls it once; the plugin host may call
// it again before each start, since the file can change under a running
// daemon.
func (p *Plugin) CheckBinary() (string, hcl.Diagnostics) {
	cmdRange := p.rangeOf("command")
	fail := func(subject *hcl.Range, summary, detail string, args ...any) (string, hcl.Diagnostics) {
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   fmt.Sprintf("plugin %q %q: ", p.Kind, p.Name) + fmt.Sprintf(detail, args...),
			Subject:  subject,
		}}
	}
	if p.pluginDir == "" {
		return fail(cmdRange, "No plugin directory", "plugin_dir is not set.")
	}
	if p.Command == "" {
		return fail(cmdRange, "Empty plugin command", "command must name a binary inside plugin_dir (%s).", p.pluginDir)
	}
	for _, elem := range strings.Split(filepath.ToSlash(p.Command), "/") {
		if elem == ".." {
			return fail(cmdRange, "Plugin command escapes plugin_dir", "command %q must not contain \"..\"; plugin binaries are only run from plugin_dir (%s).", p.Command, p.pluginDir)
		}
	}
	dir := filepath.Clean(p.pluginDir)
	candidate := filepath.Join(dir, p.Command)
	if filepath.IsAbs(p.Command) {
		candidate = filepath.Clean(p.Command)
		if !within(dir, candidate) {
			return fail(cmdRange, "Plugin command outside plugin_dir", "%s is not inside plugin_dir (%s); plugin binaries are only run from there.", candidate, dir)
		}
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fail(cmdRange, "Plugin directory not found", "plugin_dir %s cannot be used: %s. Build the plugins with `make build`, or set plugin_dir.", dir, pathErr(err))
	}
	realCmd, err := filepath.EvalSymlinks(candidate)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fail(cmdRange, "Plugin binary not found", "%s does not exist. Build the plugins with `make build`, or set command to a binary inside plugin_dir (%s).", candidate, dir)
		}
		return fail(cmdRange, "Plugin binary cannot be resolved", "%s: %s.", candidate, pathErr(err))
	}
	if !within(realDir, realCmd) {
		return fail(cmdRange, "Plugin binary escapes plugin_dir", "%s resolves to %s, which is outside plugin_dir (%s).", candidate, realCmd, realDir)
	}
	fi, err := os.Stat(realCmd)
	if err != nil {
		return fail(cmdRange, "Plugin binary cannot be read", "%s: %s.", realCmd, pathErr(err))
	}
	if !fi.Mode().IsRegular() {
		return fail(cmdRange, "Plugin binary is not a file", "%s is not a regular file.", realCmd)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fail(cmdRange, "Plugin binary is not executable", "%s has mode %s; make it executable.", realCmd, fi.Mode().Perm())
	}
	if p.SHA256 != "" {
		shaRange := p.rangeOf("sha256")
		if len(p.SHA256Bytes) != sha256.Size {
			return fail(shaRange, "Invalid sha256", "sha256 must be 64 hexadecimal characters; got %d characters.", len(p.SHA256))
		}
		sum, err := fileSHA256(realCmd)
		if err != nil {
			return fail(cmdRange, "Plugin binary cannot be read", "%s: %s.", realCmd, pathErr(err))
		}
		if !bytes.Equal(sum, p.SHA256Bytes) {
			return fail(shaRange, "Plugin binary checksum mismatch", "the sha256 of %s is %x, but the config expects %s. Rebuilt on purpose? Update sha256.", realCmd, sum, strings.ToLower(p.SHA256))
		}
	}
	return realCmd, nil
}

// within reports whether p lies strictly inside dir (both clean, absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil || filepath.IsAbs(rel) {
		return false
	}
	return rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// pathErr drops the path an *fs.PathError repeats, since our messages
// already name it.
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func fileSHA256(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
