package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

type config struct {
	RulesDir *string `json:"rules_dir"`
	Builtin  *bool   `json:"builtin"`
}

// Generator writes programs from rules; it holds no state between calls
// beyond the parsed rules.
type Generator struct {
	log hclog.Logger

	mu  sync.RWMutex
	set *Set
}

// New returns a generator that has no rules yet; Configure loads them.
func New(log hclog.Logger) *Generator {
	return &Generator{log: log}
}

func (g *Generator) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:        "rules",
		Kind:        pluginapi.KindCodegen,
		Version:     version.Version,
		APIVersions: []string{codegen.APIVersion},
		ConfigSchema: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
			{Name: "rules_dir", Type: "string", Description: "Directory of *.hcl rule files, tried before the built-in rules."},
			{Name: "builtin", Type: "bool", Description: "Use the built-in rules (default true)."},
		}},
	}, nil
}

// Configure loads the rules the block names; a rule file that does not
// parse is an error diagnostic against rules_dir.
func (g *Generator) Configure(_ context.Context, raw json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindCodegen, []string{codegen.APIVersion}, apiVersion); diags.HasErrors() {
		return diags, nil
	}
	var c config
	if diags := pluginapi.DecodeConfig("the rules generator", raw, &c); diags.HasErrors() {
		return diags, nil
	}
	set := &Set{}
	var diags pluginapi.Diagnostics
	if c.RulesDir != nil && *c.RulesDir != "" {
		// A misspelt or missing directory would otherwise load no rule
		// without a word: fs.Glob finds nothing there.
		if fi, err := os.Stat(*c.RulesDir); err != nil {
			return pluginapi.Diagnostics{pluginapi.Errorf("rules_dir", "Rules directory not found", fmt.Sprintf("%v; create it, or correct rules_dir (relative paths are relative to cexec.hcl's directory).", err))}, nil
		} else if !fi.IsDir() {
			return pluginapi.Diagnostics{pluginapi.Errorf("rules_dir", "Rules directory not found", fmt.Sprintf("%s is not a directory; rules_dir names the directory that holds the *.hcl rule files.", *c.RulesDir))}, nil
		}
		user, d := LoadDir(*c.RulesDir)
		diags = append(diags, fromHCL("rules_dir", d)...)
		if user != nil {
			set.Rules = append(set.Rules, user.Rules...)
		}
	}
	if c.Builtin == nil || *c.Builtin {
		builtin, d := Builtin()
		diags = append(diags, fromHCL("", d)...)
		if builtin != nil {
			set.Rules = append(set.Rules, builtin.Rules...)
		}
	}
	if diags.HasErrors() {
		return diags, nil
	}
	g.mu.Lock()
	g.set = set
	g.mu.Unlock()
	g.log.Info("rules loaded", "rules", len(set.Rules))
	return diags, nil
}

func fromHCL(attr string, d hcl.Diagnostics) pluginapi.Diagnostics {
	var out pluginapi.Diagnostics
	for _, x := range d {
		detail := x.Detail
		if x.Subject != nil {
			detail = strings.TrimSpace(fmt.Sprintf("%s:%d: %s", x.Subject.Filename, x.Subject.Start.Line, detail))
		}
		sev := pluginapi.SeverityError
		if x.Severity == hcl.DiagWarning {
			sev = pluginapi.SeverityWarning
		}
		out = append(out, pluginapi.Diagnostic{Severity: sev, Summary: x.Summary, Detail: detail, Attribute: attr})
	}
	return out
}

// Generate renders the first matching rule whose required tools were
// selected. When none fits, the response has no code and says what the
// rules can do, so that the pipeline moves on to the next generator and the
// agent learns what to ask instead: a rule never guesses.
func (g *Generator) Generate(_ context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
	g.mu.RLock()
	set := g.set
	g.mu.RUnlock()
	if set == nil {
		return codegen.GenerateResponse{}, fmt.Errorf("generate: plugin not configured: %w", pluginapi.ErrUnavailable)
	}
	if req.Language != "" && req.Language != "python" {
		return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{
			pluginapi.Errorf("", "unsupported language "+req.Language, "the rules generator writes Python only")}}, nil
	}
	have := map[string]bool{}
	for _, t := range req.Tools {
		have[t.ID] = true
	}
	var diags pluginapi.Diagnostics
	matched := false
	for _, m := range set.Find(req.Task) {
		code, err := m.Render()
		if errors.Is(err, ErrNoMatch) {
			continue
		}
		matched = true
		if missing := missingTools(m.Rule.Requires, have); len(missing) > 0 {
			diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning,
				Summary: "rule " + m.Rule.Name + " matched but its tools are not available",
				Detail:  "missing: " + strings.Join(missing, ", ")})
			continue
		}
		if err != nil {
			diags = append(diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning,
				Summary: "rule " + m.Rule.Name + " matched but could not be rendered", Detail: err.Error()})
			continue
		}
		return codegen.GenerateResponse{Code: code, Diagnostics: diags, Model: "rules/" + m.Rule.Name}, nil
	}
	summary := "no rule matches the task"
	if matched {
		summary = "no matching rule could be used"
	}
	diags = append(diags, pluginapi.Errorf("", summary, set.Abilities()))
	return codegen.GenerateResponse{Diagnostics: diags}, nil
}

func missingTools(required []string, have map[string]bool) []string {
	var out []string
	for _, id := range required {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}
