package config

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// sensitiveMark is the cty mark env() puts on its result. Marks travel
// through templates, lists and maps, so `"Bearer ${env("TOKEN")}"` is still
// marked when we decode it; decoding records the path of every marked value
// and MaskedJSON masks those paths. Tracking by value rather than by
// expression also catches secrets nested inside maps and lists.
type mark string

const sensitiveMark mark = "sensitive"

// maskedValue replaces sensitive values in MaskedJSON and in diagnostics.
const maskedValue = "(sensitive)"

// evalContext is the context every expression in cexec.hcl is evaluated in:
// no variables, one function. Every value env() returns is added to seen
// when it is not nil.
func evalContext(lookup func(string) (string, bool), seen *secretSet) *hcl.EvalContext {
	return &hcl.EvalContext{Functions: map[string]function.Function{"env": envFunc(lookup, seen)}}
}

// secretSet collects the values env() returned, for Config.Secrets. Plugin
// bodies are decoded after Load, so it is safe for concurrent use.
type secretSet struct {
	mu     sync.Mutex
	values map[string]bool
}

func (s *secretSet) add(v string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]bool{}
	}
	s.values[v] = true
}

// MinSecretLen is the length from which Config.Secrets lists a value:
// shorter ones (a port, "true", a default such as "info") are too common
// to be masked wherever they occur.
const MinSecretLen = 8

// Secrets returns the values env() gave the config, at least MinSecretLen
// bytes long, longest first: what must never leave cexecd, whatever a
// server or plugin that was given one does with it.
func (c *Config) Secrets() []string {
	if c.secrets == nil {
		return nil
	}
	c.secrets.mu.Lock()
	defer c.secrets.mu.Unlock()
	var out []string
	for v := range c.secrets.values {
		if len(v) >= MinSecretLen {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return out
}

// envFunc implements env("NAME") and env("NAME", "default").
func envFunc(lookup func(string) (string, bool), seen *secretSet) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the value of one of cexecd's environment variables, marked sensitive.",
		Params:      []function.Parameter{{Name: "name", Type: cty.String}},
		VarParam:    &function.Parameter{Name: "default", Type: cty.String},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.NilVal, function.NewArgErrorf(2, "env takes a variable name and at most one default value")
			}
			name := args[0].AsString()
			if name == "" {
				return cty.NilVal, function.NewArgErrorf(0, "the variable name must not be empty")
			}
			if v, ok := lookup(name); ok {
				seen.add(v)
				return cty.StringVal(v).Mark(sensitiveMark), nil
			}
			if len(args) == 2 {
				if args[1].IsKnown() && !args[1].IsNull() {
					seen.add(args[1].AsString())
				}
				return args[1].Mark(sensitiveMark), nil
			}
			return cty.NilVal, fmt.Errorf("environment variable %s is not set; export it before starting cexecd, or give a default: env(%q, \"...\")", name, name)
		},
	})
}

// decoder accumulates diagnostics and sensitive paths while turning raw
// attributes into typed values.
type decoder struct {
	ctx       *hcl.EvalContext
	dir       string
	lookup    func(string) (string, bool)
	diags     hcl.Diagnostics
	sensitive [][]string
	// skipped attributes already have an error of their own.
	skipped map[*hcl.Attribute]bool
}

func (d *decoder) errorf(subject *hcl.Range, summary, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  subject,
	})
}

func (d *decoder) warnf(subject *hcl.Range, summary, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  subject,
	})
}

// eval evaluates attr and converts it to ty. ok is false when the attribute
// is absent, null, or wrong (then a diagnostic was added). marked reports
// whether any part of the value came from env(); the marked parts' paths are
// recorded under p.
func (d *decoder) eval(attr *hcl.Attribute, ty cty.Type, p []string) (v cty.Value, marked, ok bool) {
	if attr == nil || d.skipped[attr] {
		return cty.NilVal, false, false
	}
	val, diags := attr.Expr.Value(d.ctx)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false, false
	}
	val, pvms := val.UnmarkDeepWithPaths()
	d.recordMarks(p, pvms)
	if val.IsNull() {
		return cty.NilVal, false, false
	}
	if !val.IsWhollyKnown() {
		d.errorf(attr.Expr.Range().Ptr(), "Unknown value", "The value of %q cannot be known when the config is loaded.", attr.Name)
		return cty.NilVal, false, false
	}
	conv, err := convert.Convert(val, ty)
	if err != nil {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s.", attr.Name, err.Error()),
			Subject:  attr.Expr.Range().Ptr(),
			Context:  hcl.RangeBetween(attr.NameRange, attr.Expr.Range()).Ptr(),
		})
		return cty.NilVal, false, false
	}
	return conv, len(pvms) > 0, true
}

func (d *decoder) recordMarks(base []string, pvms []cty.PathValueMarks) {
	for _, pvm := range pvms {
		if _, ok := pvm.Marks[sensitiveMark]; !ok {
			continue
		}
		d.sensitive = append(d.sensitive, joinPath(base, pvm.Path))
	}
}

// joinPath appends a cty path to a MaskedJSON path.
func joinPath(base []string, p cty.Path) []string {
	out := append([]string(nil), base...)
	for _, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			out = append(out, s.Name)
		case cty.IndexStep:
			if s.Key.Type() == cty.String {
				out = append(out, s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				out = append(out, s.Key.AsBigFloat().Text('f', 0))
			}
		}
	}
	return out
}

// shown is s quoted, or a mask when s came from env().
func shown(s string, marked bool) string {
	if marked {
		return maskedValue
	}
	return strconv.Quote(s)
}

func (d *decoder) str(attr *hcl.Attribute, p []string) (s string, marked, ok bool) {
	v, marked, ok := d.eval(attr, cty.String, p)
	if !ok {
		return "", false, false
	}
	return v.AsString(), marked, true
}

func (d *decoder) boolean(attr *hcl.Attribute, p []string) (b, ok bool) {
	v, _, ok := d.eval(attr, cty.Bool, p)
	if !ok {
		return false, false
	}
	return v.True(), true
}

func (d *decoder) strList(attr *hcl.Attribute, p []string) ([]string, bool) {
	v, _, ok := d.eval(attr, cty.List(cty.String), p)
	if !ok {
		return nil, false
	}
	out := []string{}
	for _, e := range v.AsValueSlice() {
		if e.IsNull() {
			d.errorf(attr.Expr.Range().Ptr(), "Null list element", "The list %q must not contain null.", attr.Name)
			return nil, false
		}
		out = append(out, e.AsString())
	}
	return out, true
}

func (d *decoder) strMap(attr *hcl.Attribute, p []string) (map[string]string, bool) {
	v, _, ok := d.eval(attr, cty.Map(cty.String), p)
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for k, e := range v.AsValueMap() {
		if e.IsNull() {
			d.errorf(attr.Expr.Range().Ptr(), "Null map value", "The value of %q in %q must not be null.", k, attr.Name)
			return nil, false
		}
		out[k] = e.AsString()
	}
	return out, true
}

// integer decodes a whole number no smaller than min.
func (d *decoder) integer(attr *hcl.Attribute, p []string, min int) (int, bool) {
	v, _, ok := d.eval(attr, cty.Number, p)
	if !ok {
		return 0, false
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i > math.MaxInt32 {
		d.errorf(attr.Expr.Range().Ptr(), "Invalid number", "%q must be a whole number no larger than %d; got %s.", attr.Name, math.MaxInt32, bf.Text('g', 10))
		return 0, false
	}
	n := int(i)
	if n < min {
		d.errorf(attr.Expr.Range().Ptr(), "Number out of range", "%q must be at least %d, not %d.", attr.Name, min, n)
		return 0, false
	}
	return n, true
}

// duration decodes a positive duration string such as "30s" or "1m30s".
func (d *decoder) duration(attr *hcl.Attribute, p []string) (time.Duration, bool) {
	s, marked, ok := d.str(attr, p)
	if !ok {
		return 0, false
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur <= 0 {
		d.errorf(attr.Expr.Range().Ptr(), "Invalid duration",
			"%q must be a positive duration with a unit, like \"30s\", \"5m\" or \"1h30m\"; got %s.", attr.Name, shown(s, marked))
		return 0, false
	}
	return dur, true
}

// size decodes a positive byte size with a unit ("256MiB", "1GB").
func (d *decoder) size(attr *hcl.Attribute, p []string) (int64, bool) {
	v, marked, ok := d.eval(attr, cty.DynamicPseudoType, p)
	if !ok {
		return 0, false
	}
	n, err := SizeValue(attr.Name, v)
	if err != nil {
		got := ""
		if v.Type() == cty.String {
			got = " (got " + shown(v.AsString(), marked) + ")"
		}
		d.errorf(attr.Expr.Range().Ptr(), "Invalid size", "%q: %s%s.", attr.Name, err, got)
		return 0, false
	}
	return n, true
}

// SizeValue is the positive byte size v states for the attribute name. A
// size needs a unit: a bare 256 reads as 256 bytes where "256MiB" was
// meant, and such a sandbox starts but fails every execution, so a number
// or a unitless string is refused with what to write instead.
func SizeValue(name string, v cty.Value) (int64, error) {
	if v.IsNull() || !v.IsKnown() {
		return 0, fmt.Errorf("it must be set, like %s = \"256MiB\"", name)
	}
	switch v.Type() {
	case cty.Number:
		return 0, needsUnit(name, v.AsBigFloat().Text('f', -1))
	case cty.String:
		s := v.AsString()
		if m := sizeRE.FindStringSubmatch(s); m != nil && m[2] == "" {
			return 0, needsUnit(name, m[1])
		}
		n, err := ParseSize(s)
		if err != nil {
			return 0, err
		}
		if n <= 0 {
			return 0, fmt.Errorf("a size must be positive")
		}
		return n, nil
	default:
		return 0, fmt.Errorf("a size is a string with a unit, like %s = \"256MiB\"", name)
	}
}

func needsUnit(name, num string) error {
	return fmt.Errorf("a size needs a unit; write %s = \"%sMiB\" for mebibytes or \"%sB\" for bytes (units: B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)", name, num, num)
}

var sizeUnits = map[string]int64{
	"B":  1,
	"KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000, "TB": 1000 * 1000 * 1000 * 1000,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$`)

// ParseSize parses a byte size: a number with a unit, bytes (B), decimal
// (KB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB), like "1.5GiB". The
// result must be a whole number of bytes that fits in an int64.
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("not a size; write a number with a unit, like \"64MiB\"")
	}
	if m[2] == "" {
		return 0, fmt.Errorf("%q has no unit; write it with one, like \"%sMiB\" or \"%sB\"", strings.TrimSpace(s), m[1], m[1])
	}
	unit, ok := sizeUnits[m[2]]
	if !ok {
		names := make([]string, 0, len(sizeUnits))
		for u := range sizeUnits {
			names = append(names, u)
		}
		sort.Slice(names, func(i, j int) bool {
			return sizeUnits[names[i]] < sizeUnits[names[j]] || sizeUnits[names[i]] == sizeUnits[names[j]] && names[i] < names[j]
		})
		return 0, fmt.Errorf("unknown unit %q; use one of %s", m[2], strings.Join(names, ", "))
	}
	r, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("invalid number %q", m[1])
	}
	r.Mul(r, new(big.Rat).SetInt64(unit))
	if !r.IsInt() {
		return 0, fmt.Errorf("%s is not a whole number of bytes", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%s is too large", s)
	}
	return r.Num().Int64(), nil
}
