// Package pii is the guard-pii plugin: its Guard answers Detect with the
// spans of package detect and CheckCode with the checks of package
// codecheck, as the plugin block configures them.
package pii

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/plugins/guard-pii/internal/codecheck"
	"github.com/cexec/cexec/plugins/guard-pii/internal/detect"
)

// config is the plugin block of cexec.hcl as the host decodes it. Pointers
// tell "not set" from zero values.
type config struct {
	Types            []string          `json:"types"`
	PhoneRegion      *string           `json:"phone_region"`
	EntropySecrets   *bool             `json:"entropy_secrets"`
	EntropyThreshold *float64          `json:"entropy_threshold"`
	EntropyMinLength *float64          `json:"entropy_min_length"`
	NERURL           *string           `json:"ner_url"`
	NERTimeout       *string           `json:"ner_timeout"`
	NERHeaders       map[string]string `json:"ner_headers"`
	CodeChecks       []string          `json:"code_checks"`
	CodeRules        []codeRuleConfig  `json:"code_rule"`
}

type codeRuleConfig struct {
	Name    string   `json:"name"`
	Match   []string `json:"match"`
	Message string   `json:"message"`
}

var schema = pluginapi.ConfigSchema{
	Attributes: []pluginapi.Attribute{
		{Name: "types", Type: "list(string)", Description: "Types to detect: EMAIL, PHONE, US_SSN, CREDIT_CARD, IBAN, IP_ADDRESS, SECRET, PERSON. Default: all but PERSON, and PERSON too when ner_url is set."},
		{Name: "phone_region", Type: "string", Description: `Region (ISO 3166 alpha-2) whose national format phone numbers are recognised, e.g. "GB" for "020 7946 0958". Numbers written with + are recognised for every region. Default "US".`},
		{Name: "entropy_secrets", Type: "bool", Description: "Report long random-looking tokens as SECRET even without a known prefix (default true)."},
		{Name: "entropy_threshold", Type: "number", Description: "Minimum Shannon entropy in bits per character for entropy_secrets (default 3.5; random 20-character base64 scores about 4)."},
		{Name: "entropy_min_length", Type: "number", Description: "Minimum token length for entropy_secrets (default 20)."},
		{Name: "ner_url", Type: "string", Description: `HTTP(S) endpoint of a named-entity recogniser for PERSON: POST {"text"} answering {"entities":[{"start","end","type"}]} with code point offsets.`},
		{Name: "ner_timeout", Type: "string", Description: `Deadline of one NER request, e.g. "5s" (default "10s").`},
		{Name: "ner_headers", Type: "map(string)", Description: "Headers sent to ner_url, e.g. Authorization.", Sensitive: true},
		{Name: "code_checks", Type: "list(string)", Description: `Built-in code checks to enable (all off by default): proc_environ, proc_mem, ptrace, cloud_metadata, docker_socket, ld_preload, dev_mem, or "all". Defence in depth; the sandbox is the boundary.`},
	},
	Blocks: []pluginapi.NestedBlock{{
		TypeName: "code_rule",
		List:     true,
		Body: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
			{Name: "name", Type: "string", Required: true, Description: "Rule name, shown in denials."},
			{Name: "match", Type: "list(string)", Required: true, Description: "RE2 patterns; code is denied when all of them match."},
			{Name: "message", Type: "string", Description: "Why the code is denied, for the agent."},
		}},
	}},
}

// state is one configuration, swapped as a whole so calls never see half of
// a new one.
type state struct {
	detector *detect.Detector
	code     *codecheck.Checker
}

// Guard detects PII and checks code. It keeps no per-session state: the
// host tokenizes and owns the vault.
type Guard struct {
	guard.Unimplemented // CheckToolCall: tool-call policy lives in the host
	log                 hclog.Logger
	state               atomic.Pointer[state]
}

func New(log hclog.Logger) *Guard {
	g := &Guard{log: log}
	det, err := detect.New(detect.Options{})
	if err != nil {
		panic(fmt.Sprintf("default detector: %v", err)) // the defaults are constants
	}
	code, _ := codecheck.New(nil, nil)
	g.state.Store(&state{detector: det, code: code})
	return g
}

func (g *Guard) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         "pii",
		Kind:         pluginapi.KindGuard,
		Version:      version.Version,
		APIVersions:  []string{guard.APIVersion},
		ConfigSchema: schema,
	}, nil
}

// Configure validates the whole block, reporting each problem against its
// attribute, and applies it only when there is no error.
func (g *Guard) Configure(_ context.Context, raw json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindGuard, []string{guard.APIVersion}, apiVersion); diags.HasErrors() {
		return diags, nil
	}
	var c config
	if diags := pluginapi.DecodeConfig("the pii guard", raw, &c); diags.HasErrors() {
		return diags, nil
	}
	st, diags := build(c)
	if diags.HasErrors() {
		return diags, nil
	}
	g.state.Store(st)
	g.log.Info("configured", "types", st.detector.Types(), "phone_region", regionOf(c),
		"ner", c.NERURL != nil && *c.NERURL != "", "code_rules", len(c.CodeRules), "code_checks", c.CodeChecks)
	return diags, nil
}

func regionOf(c config) string {
	if c.PhoneRegion != nil {
		return strings.ToUpper(*c.PhoneRegion)
	}
	return detect.DefaultPhoneRegion
}

// build checks every attribute and returns the state they describe.
func build(c config) (*state, pluginapi.Diagnostics) {
	ch := &checks{}
	nerURL, timeout := checkNER(c, ch)
	checkTypes(c, nerURL != "", ch)
	opts := detect.Options{Types: c.Types, PhoneRegion: regionOf(c)}
	if err := detect.CheckRegion(opts.PhoneRegion); err != nil {
		ch.bad("phone_region", "unknown phone region", err)
	}
	entropyOptions(c, &opts, ch)
	code := codeChecker(c, ch)
	if ch.diags.HasErrors() {
		return nil, ch.diags
	}
	if nerURL != "" {
		ner, err := detect.NewNERClient(nerURL, c.NERHeaders, timeout)
		if err != nil {
			ch.bad("ner_url", "invalid NER endpoint", err)
			return nil, ch.diags
		}
		opts.NER = ner
	}
	det, err := detect.New(opts)
	if err != nil {
		// Every option was checked above; this is a bug, reported anyway.
		return nil, append(ch.diags, pluginapi.Errorf("", "invalid configuration", err.Error()))
	}
	return &state{detector: det, code: code}, ch.diags
}

// checks collects build's diagnostics in the order they are found, so that
// one Configure reports every mistake.
type checks struct {
	diags pluginapi.Diagnostics
}

func (ch *checks) bad(attr, summary string, err error) {
	ch.diags = append(ch.diags, pluginapi.Errorf(attr, summary, err.Error()))
}

func (ch *checks) warn(attr, summary, detail string) {
	ch.diags = append(ch.diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Attribute: attr, Summary: summary, Detail: detail})
}

// checkNER checks the NER attributes and returns the endpoint ("" for
// none) and the timeout of its requests.
func checkNER(c config, ch *checks) (nerURL string, timeout time.Duration) {
	if c.NERURL != nil {
		nerURL = *c.NERURL
	}
	if nerURL != "" {
		if err := detect.CheckNERURL(nerURL); err != nil {
			ch.bad("ner_url", "invalid NER endpoint", err)
		}
	}
	timeout = detect.DefaultNERTimeout
	if c.NERTimeout != nil {
		d, err := time.ParseDuration(*c.NERTimeout)
		switch {
		case err != nil:
			ch.bad("ner_timeout", "invalid duration", err)
		case d <= 0:
			ch.bad("ner_timeout", "invalid duration", fmt.Errorf("%s is not positive", d))
		default:
			timeout = d
		}
	}
	for name := range c.NERHeaders {
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			ch.bad("ner_headers", "invalid header name", fmt.Errorf("%q is not an HTTP header name", name))
		}
	}
	if len(c.NERHeaders) > 0 && nerURL == "" {
		ch.warn("ner_headers", "ner_headers without ner_url", "the headers are only sent to an NER endpoint; set ner_url or remove them")
	}
	return nerURL, timeout
}

// checkTypes checks the types list against what the detectors (and NER,
// when configured) can find.
func checkTypes(c config, ner bool, ch *checks) {
	if len(c.Types) == 0 {
		return
	}
	if err := detect.CheckTypes(c.Types, ner); err != nil {
		ch.bad("types", "invalid type list", err)
	} else if ner && !slices.Contains(c.Types, detect.Person) {
		ch.warn("types", "ner_url set but PERSON not in types", "the NER endpoint is only asked for PERSON; add it to types or remove ner_url")
	}
}

// entropyOptions applies the attributes of the high-entropy SECRET rule.
func entropyOptions(c config, opts *detect.Options, ch *checks) {
	if c.EntropySecrets != nil && !*c.EntropySecrets {
		opts.DisableEntropy = true
	}
	if c.EntropyThreshold != nil {
		opts.EntropyThreshold = *c.EntropyThreshold
		if err := detect.CheckEntropy(*c.EntropyThreshold, detect.DefaultEntropyMinLength); err != nil {
			ch.bad("entropy_threshold", "invalid entropy threshold", err)
		}
	}
	if c.EntropyMinLength != nil {
		n := *c.EntropyMinLength
		if n != math.Trunc(n) || n < 0 || n > math.MaxInt32 {
			ch.bad("entropy_min_length", "invalid minimum length", fmt.Errorf("%v is not a whole number of characters", n))
		} else if err := detect.CheckEntropy(detect.DefaultEntropyThreshold, int(n)); err != nil {
			ch.bad("entropy_min_length", "invalid minimum length", err)
		} else {
			opts.EntropyMinLength = int(n)
		}
	}
}

// codeChecker builds the code checks and rules, reporting a bad rule
// against its index and field.
func codeChecker(c config, ch *checks) *codecheck.Checker {
	rules := make([]codecheck.Rule, len(c.CodeRules))
	for i, r := range c.CodeRules {
		rules[i] = codecheck.Rule(r)
	}
	code, err := codecheck.New(c.CodeChecks, rules)
	if err != nil {
		var re *codecheck.RuleError
		switch {
		case errors.As(err, &re) && re.Index >= 0:
			ch.bad(fmt.Sprintf("code_rule.%d.%s", re.Index, re.Field), "invalid code rule", re.Err)
		default:
			ch.bad("code_checks", "invalid code check", err)
		}
	}
	return code
}

// Detect returns the sensitive spans of req.Text, restricted to req.Types
// when set (names this plugin does not detect are ignored).
func (g *Guard) Detect(ctx context.Context, req guard.DetectRequest) ([]guard.Span, error) {
	spans, err := g.state.Load().detector.Detect(ctx, req.Text, req.Types)
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	return spans, nil
}

// CheckCode denies code matching an enabled code check or rule. Without
// any it is unimplemented, so the host stops asking (a round trip per
// execution) until the plugin is restarted with another configuration.
func (g *Guard) CheckCode(_ context.Context, req guard.CheckCodeRequest) (guard.Decision, error) {
	st := g.state.Load()
	if st.code.Empty() {
		return guard.Decision{}, pluginapi.ErrUnimplemented
	}
	diags := st.code.Check(req.Code)
	if len(diags) == 0 {
		return guard.Decision{Allow: true}, nil
	}
	rules := make([]string, len(diags))
	for i, d := range diags {
		rules[i] = d.Summary
	}
	g.log.Info("code denied", "tenant", req.Tenant, "session", req.Session, "rules", rules)
	return guard.Decision{Allow: false, Diagnostics: diags}, nil
}
