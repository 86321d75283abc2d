package policy

import (
	"fmt"
	"math/big"
	"path"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"

	"github.com/cexec/cexec/core/config"
)

// rawPolicy is the schema of a policy block. Attributes stay raw so each
// is evaluated on its own and every problem points at its own line.
type rawPolicy struct {
	Strict       *hcl.Attribute   `hcl:"strict,optional"`
	PIIFailOpen  *hcl.Attribute   `hcl:"pii_fail_open,optional"`
	MaxToolCalls *hcl.Attribute   `hcl:"max_tool_calls,optional"`
	MaxOutput    *hcl.Attribute   `hcl:"max_output,optional"`
	Allow        *hcl.Attribute   `hcl:"allow,optional"`
	Deny         *hcl.Attribute   `hcl:"deny,optional"`
	DenyCode     *hcl.Attribute   `hcl:"deny_code,optional"`
	Constraints  []*rawConstraint `hcl:"constraint,block"`
	Approvals    []*rawApproval   `hcl:"approval,block"`
}

type rawConstraint struct {
	Tool      string         `hcl:"tool,label"`
	ToolRange hcl.Range      `hcl:"tool,label_range"`
	Argument  *hcl.Attribute `hcl:"argument"`
	Required  *hcl.Attribute `hcl:"required,optional"`
	Prefix    *hcl.Attribute `hcl:"prefix,optional"`
	Max       *hcl.Attribute `hcl:"max,optional"`
	Min       *hcl.Attribute `hcl:"min,optional"`
	Pattern   *hcl.Attribute `hcl:"pattern,optional"`
	OneOf     *hcl.Attribute `hcl:"one_of,optional"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

// Decode decodes a tenant's policy block body (config.Tenant.Policy). A
// nil body is an empty policy, which allows everything. Every problem is
// a diagnostic at the offending attribute or list element.
func Decode(body hcl.Body) (*Policy, hcl.Diagnostics) {
	p := &Policy{}
	if body == nil {
		return p, nil
	}
	var raw rawPolicy
	diags := gohcl.DecodeBody(body, nil, &raw)
	if diags.HasErrors() {
		return nil, diags
	}
	d := &decoder{diags: diags}
	if v, ok := d.bool(raw.Strict); ok {
		p.Strict = v
	}
	if v, ok := d.bool(raw.PIIFailOpen); ok {
		p.PIIFailOpen = v
		if v && p.Strict {
			d.errorf(raw.PIIFailOpen.Range, "Conflicting pii_fail_open", "a strict policy fails closed; remove pii_fail_open or strict.")
		}
	}
	if n, ok := d.positiveInt(raw.MaxToolCalls, `use deny = ["*"] to forbid tool calls`); ok {
		p.MaxToolCalls = n
	}
	if n, ok := d.size(raw.MaxOutput); ok {
		p.MaxOutput = n
	}
	p.Allow = d.patterns(raw.Allow)
	p.Deny = d.patterns(raw.Deny)
	p.DenyCode = d.regexps(raw.DenyCode)
	for _, rc := range raw.Constraints {
		if c := d.constraint(rc); c != nil {
			p.Constraints = append(p.Constraints, c)
		}
	}
	for _, ra := range raw.Approvals {
		p.Approvals = append(p.Approvals, d.approval(ra))
	}
	if d.diags.HasErrors() {
		return nil, d.diags
	}
	return p, d.diags
}

// DecodeTenants decodes the policy of every tenant in cfg, by tenant id.
// Tenants without a policy block get an empty policy. Use it in `cexecd
// validate` as well as at start-up, so a policy error fails early with its
// line.
func DecodeTenants(cfg *config.Config) (map[string]*Policy, hcl.Diagnostics) {
	out := map[string]*Policy{}
	var diags hcl.Diagnostics
	for _, t := range cfg.Tenants {
		p, ds := Decode(t.Policy)
		diags = append(diags, ds...)
		if p != nil {
			out[t.ID] = p
		}
	}
	return out, diags
}

type decoder struct {
	diags hcl.Diagnostics
}

func (d *decoder) errorf(rng hcl.Range, summary, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: rng.Ptr(),
	})
}

// value evaluates an attribute with no variables or functions: a policy
// is plain data.
func (d *decoder) value(a *hcl.Attribute, target any) bool {
	ds := gohcl.DecodeExpression(a.Expr, nil, target)
	d.diags = append(d.diags, ds...)
	return !ds.HasErrors()
}

func (d *decoder) bool(a *hcl.Attribute) (bool, bool) {
	var v bool
	if a == nil || !d.value(a, &v) {
		return false, false
	}
	return v, true
}

func (d *decoder) str(a *hcl.Attribute) (string, bool) {
	var v string
	if a == nil || !d.value(a, &v) {
		return "", false
	}
	return v, true
}

func (d *decoder) positiveInt(a *hcl.Attribute, hint string) (int, bool) {
	if a == nil {
		return 0, false
	}
	var n float64
	if !d.value(a, &n) {
		return 0, false
	}
	if n < 1 || n != float64(int(n)) || n > 1<<31 {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%q must be a whole number of at least 1; %s.", a.Name, hint)
		return 0, false
	}
	return int(n), true
}

func (d *decoder) size(a *hcl.Attribute) (int64, bool) {
	if a == nil {
		return 0, false
	}
	v, ds := a.Expr.Value(nil)
	d.diags = append(d.diags, ds...)
	if ds.HasErrors() {
		return 0, false
	}
	n, err := config.SizeValue(a.Name, v)
	if err != nil {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%q: %s.", a.Name, err)
		return 0, false
	}
	return n, true
}

// list evaluates a list of strings and returns each element with the
// range to blame for it; ok is false when a is set and has errors.
func (d *decoder) list(a *hcl.Attribute) (vals []string, ranges []hcl.Range, ok bool) {
	if a == nil {
		return nil, nil, true
	}
	if !d.value(a, &vals) {
		return nil, nil, false
	}
	ranges = make([]hcl.Range, len(vals))
	exprs, ds := hcl.ExprList(a.Expr)
	for i := range ranges {
		ranges[i] = a.Expr.Range()
		if !ds.HasErrors() && len(exprs) == len(vals) {
			ranges[i] = exprs[i].Range()
		}
	}
	return vals, ranges, true
}

func (d *decoder) patterns(a *hcl.Attribute) []string {
	vals, ranges, _ := d.list(a)
	var out []string
	for i, p := range vals {
		if err := checkPattern(p); err != nil {
			d.errorf(ranges[i], "Invalid tool pattern", "%q in %q: %s.", p, a.Name, err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// checkPattern validates a tool pattern: "server" or "server/tool", each
// part a non-empty path.Match glob.
func checkPattern(p string) error {
	server, tool, hasTool := strings.Cut(p, "/")
	switch {
	case server == "":
		return fmt.Errorf(`a pattern is "server" or "server/tool", such as "filesystem/*"`)
	case hasTool && (tool == "" || strings.Contains(tool, "/")):
		return fmt.Errorf(`a pattern is "server" or "server/tool" with one slash, such as "memory/delete_*"`)
	}
	for _, part := range []string{server, tool} {
		if _, err := path.Match(part, ""); err != nil {
			return fmt.Errorf("malformed glob %q", part)
		}
	}
	return nil
}

func (d *decoder) regexps(a *hcl.Attribute) []*regexp.Regexp {
	vals, ranges, _ := d.list(a)
	var out []*regexp.Regexp
	for i, p := range vals {
		re, err := regexp.Compile(p)
		if err != nil {
			d.errorf(ranges[i], "Invalid regular expression", "%q in %q: %s.", p, a.Name, err)
			continue
		}
		out = append(out, re)
	}
	return out
}

func (d *decoder) number(a *hcl.Attribute) *big.Float {
	if a == nil {
		return nil
	}
	v, ds := a.Expr.Value(nil)
	d.diags = append(d.diags, ds...)
	if ds.HasErrors() {
		return nil
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		d.errorf(a.Expr.Range(), "Invalid "+a.Name, "%q must be a number.", a.Name)
		return nil
	}
	return v.AsBigFloat()
}

func (d *decoder) constraint(rc *rawConstraint) *Constraint {
	c := &Constraint{Tool: rc.Tool, DeclRange: rc.DeclRange}
	n := len(d.diags)
	if err := checkPattern(rc.Tool); err != nil {
		d.errorf(rc.ToolRange, "Invalid tool pattern", "constraint %q: %s.", rc.Tool, err)
	}
	if rc.Argument == nil {
		// gohcl treats *hcl.Attribute fields as optional.
		d.errorf(rc.DeclRange, "Missing required argument", "constraint %q: the argument \"argument\" is required: it names the argument the constraint checks.", rc.Tool)
	}
	if arg, ok := d.str(rc.Argument); ok {
		if arg == "" || strings.HasPrefix(arg, ".") || strings.HasSuffix(arg, ".") {
			d.errorf(rc.Argument.Expr.Range(), "Invalid argument name", "constraint %q: argument must name an argument, such as \"path\" or \"options.path\".", rc.Tool)
		}
		c.Argument = arg
	}
	c.Required, _ = d.bool(rc.Required)
	if s, ok := d.str(rc.Prefix); ok {
		if s == "" {
			d.errorf(rc.Prefix.Expr.Range(), "Invalid prefix", "constraint %q: an empty prefix checks nothing.", rc.Tool)
		}
		c.Prefix = s
	}
	c.Max, c.Min = d.number(rc.Max), d.number(rc.Min)
	if c.Max != nil && c.Min != nil && c.Min.Cmp(c.Max) > 0 {
		d.errorf(rc.Min.Range, "Invalid bounds", "constraint %q: min %s is above max %s.", rc.Tool, c.Min.Text('g', -1), c.Max.Text('g', -1))
	}
	if s, ok := d.str(rc.Pattern); ok {
		re, err := regexp.Compile(s)
		if err != nil {
			d.errorf(rc.Pattern.Expr.Range(), "Invalid regular expression", "constraint %q: %s.", rc.Tool, err)
		}
		c.Pattern = re
	}
	if rc.OneOf != nil {
		var ok bool
		if c.OneOf, _, ok = d.list(rc.OneOf); ok && len(c.OneOf) == 0 {
			d.errorf(rc.OneOf.Expr.Range(), "Invalid one_of", "constraint %q: an empty one_of allows nothing; deny the tool instead.", rc.Tool)
		}
	}
	if !c.Required && c.Prefix == "" && c.Max == nil && c.Min == nil && c.Pattern == nil && c.OneOf == nil && !d.diags[n:].HasErrors() {
		d.errorf(rc.DeclRange, "Empty constraint", "constraint %q on %q checks nothing: set required, prefix, max, min, pattern or one_of.", rc.Tool, c.Argument)
	}
	if d.diags[n:].HasErrors() {
		return nil
	}
	return c
}

// FormatSize writes a byte count the way people write sizes in cexec.hcl.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
