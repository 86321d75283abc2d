// Package pluginapi is the public SDK for cexec plugins. A third party writes
// a plugin of any kind by importing this package and the package of its kind
// (pluginapi/selector, pluginapi/codegen, pluginapi/guard or
// pluginapi/sandbox) and nothing from cexec's core.
//
// Plugins are separate processes that cexecd launches with hashicorp/go-plugin
// and talks to over gRPC. Every kind answers Info and Configure; the
// kind-specific calls live in the kind's package.
//
// examples/plugin-selector-keyword in cexec's repository is a complete
// plugin, and its README.md the steps from an empty module to a plugin
// cexecd runs: module setup, Info and its ConfigSchema, Configure, errors,
// logging, installing into plugin_dir and the pipeline, testing.
package pluginapi

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hashicorp/go-plugin"
)

// ProtocolVersion is the go-plugin protocol major version. A breaking change
// to any kind's API ships as a new proto package (v2) and a new protocol
// version, served side by side through go-plugin's VersionedPlugins.
const ProtocolVersion = 1

// Handshake is the go-plugin handshake shared by cexecd and every plugin. The
// cookie only guards against running a plugin binary by hand; it is not a
// security measure.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "CEXEC_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "cexec-plugin-7c2f0e5a4b1d49d8",
}

// Kind names a plugin kind. It is also the go-plugin dispense name.
type Kind string

// The four plugin kinds.
const (
	KindSelector Kind = "selector"
	KindCodegen  Kind = "codegen"
	KindGuard    Kind = "guard"
	KindSandbox  Kind = "sandbox"
)

// Kinds lists every plugin kind, in a stable order.
var Kinds = []Kind{KindSelector, KindCodegen, KindGuard, KindSandbox}

// ValidKind reports whether k names a known plugin kind.
func ValidKind(k string) bool {
	for _, known := range Kinds {
		if string(known) == k {
			return true
		}
	}
	return false
}

// Severity of a Diagnostic.
type Severity int

// Diagnostic severities.
const (
	SeverityError Severity = iota + 1
	SeverityWarning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Diagnostic is a user-facing problem: a config error, a guard's denial, a
// generator that could not write code.
type Diagnostic struct {
	Severity Severity
	Summary  string
	Detail   string
	// Attribute is the dotted path of the config attribute the diagnostic
	// is about (for example "embeddings.model"), so the host can point at
	// its line in cexec.hcl. Empty when it is about no single attribute.
	Attribute string
}

// Diagnostics is a list of diagnostics.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (d Diagnostics) HasErrors() bool {
	for _, x := range d {
		if x.Severity != SeverityWarning {
			return true
		}
	}
	return false
}

// Error joins the error diagnostics' summaries, for use in error messages.
func (d Diagnostics) Error() string {
	var parts []string
	for _, x := range d {
		if x.Severity == SeverityWarning {
			continue
		}
		s := x.Summary
		if x.Detail != "" {
			s += ": " + x.Detail
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Errorf returns a single error diagnostic about attribute attr (may be empty).
func Errorf(attr, summary, detail string) Diagnostic {
	return Diagnostic{Severity: SeverityError, Summary: summary, Detail: detail, Attribute: attr}
}

// Attribute declares one attribute of a plugin's config block.
type Attribute struct {
	Name string
	// Type is an HCL type expression: string, number, bool, list(string),
	// map(string), list(number), any.
	Type        string
	Required    bool
	Description string
	// Sensitive values are masked by `cexecctl config show` and never logged.
	Sensitive bool
}

// NestedBlock declares a block inside a plugin's config block. List blocks
// may repeat and decode to a JSON array; single blocks decode to an object.
type NestedBlock struct {
	TypeName string
	List     bool
	Body     ConfigSchema
}

// ConfigSchema is the shape of the plugin-specific part of a
// `plugin "<kind>" "<name>" { ... }` block. The host decodes the block against
// it, so mistakes point at lines of cexec.hcl, and passes the result to
// Configure as a JSON object.
type ConfigSchema struct {
	Attributes []Attribute
	Blocks     []NestedBlock
}

// Info identifies a plugin and what it speaks.
type Info struct {
	Name    string
	Kind    Kind
	Version string
	// APIVersions lists the kind API versions the plugin implements, for
	// example ["v1"]. The host picks one and passes it to Configure.
	APIVersions  []string
	ConfigSchema ConfigSchema
}

// Base is what every plugin kind implements.
type Base interface {
	// Info describes the plugin. It must not depend on configuration.
	Info(ctx context.Context) (Info, error)
	// Configure receives the decoded plugin block as a JSON object and the
	// API version the host chose. Error diagnostics stop the daemon from
	// starting (or, for plugins with required = false, disable the plugin).
	Configure(ctx context.Context, config json.RawMessage, apiVersion string) (Diagnostics, error)
}
