package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/pluginapi"
)

// Policy is a tenant's decoded policy block. The zero value, and a nil
// *Policy, allow everything.
type Policy struct {
	// Strict fails closed when a guard plugin is unavailable.
	Strict bool
	// PIIFailOpen lets model-facing output go out untokenized while a
	// guard cannot detect (down, restarting, erroring). Off by default:
	// such output is withheld whatever Strict says, as raw PII would
	// otherwise reach the model. Strict wins over it.
	PIIFailOpen bool
	// MaxToolCalls bounds the tool calls of one execution; 0: unlimited.
	MaxToolCalls int
	// MaxOutput bounds what one execution returns to the model, in bytes
	// after tokenization; 0: unlimited.
	MaxOutput int64
	// Allow and Deny are tool patterns (see Match). A call must match an
	// Allow pattern, when there are any, and no Deny pattern.
	Allow, Deny []string
	// DenyCode refuses code that matches any of these.
	DenyCode []*regexp.Regexp
	// Constraints check the arguments of tool calls.
	Constraints []*Constraint
	// Approvals are the rules of calls that wait for a person's approval.
	Approvals []*Approval
}

// Constraint checks one argument of the tools its pattern matches. Every
// check that is set must hold.
type Constraint struct {
	// Tool is a tool pattern (see Match).
	Tool string
	// Argument names the argument; dots reach into objects
	// ("options.path").
	Argument string
	// Required makes a missing (or null) argument a violation; otherwise
	// the checks only apply when the argument is present.
	Required bool
	// Prefix: strings must start with it. A prefix starting with "/" is a
	// path: the value is cleaned first ("/data/out/../x" is "/data/x")
	// and must be the prefix folder or inside it.
	Prefix string
	// Max and Min bound numbers (nil: no bound).
	Max, Min *big.Float
	// Pattern: strings must match (RE2, unanchored; use ^...$).
	Pattern *regexp.Regexp
	// OneOf lists the allowed values; numbers and booleans compare by
	// their text.
	OneOf []string
	// DeclRange is where the block is, for messages about the config.
	DeclRange hcl.Range
}

// Violation is a denial by the policy. It wraps pluginapi.ErrDenied.
type Violation struct {
	// Rule is the policy attribute that denied: allow, deny, constraint,
	// max_tool_calls, max_output or deny_code.
	Rule string
	// Server and Tool of the call, when the violation is about one.
	Server, Tool string
	// Argument is the constrained argument, for Rule "constraint".
	Argument string
	// Reason completes "policy: " to the message.
	Reason string
}

// Error returns "policy: " and the reason, which names the rule and, for
// constraints, the argument. It never includes argument values: they may
// be the very data the policy protects.
func (v *Violation) Error() string { return "policy: " + v.Reason }

// Unwrap makes errors.Is(err, pluginapi.ErrDenied) true.
func (v *Violation) Unwrap() error { return pluginapi.ErrDenied }

// Match reports whether a tool pattern matches server/tool. A pattern is
// "server" (every tool of the server) or "server/tool", where each part
// may use path.Match globs: "filesystem/*", "memory/delete_*",
// "*/write_*".
func Match(pattern, server, tool string) bool {
	sp, tp, hasTool := strings.Cut(pattern, "/")
	if ok, _ := path.Match(sp, server); !ok {
		return false
	}
	if !hasTool {
		return true
	}
	ok, _ := path.Match(tp, tool)
	return ok
}

// CheckTool applies allow and deny to a call of server/tool. Deny wins.
func (p *Policy) CheckTool(server, tool string) error {
	if p == nil {
		return nil
	}
	for _, pat := range p.Deny {
		if Match(pat, server, tool) {
			return &Violation{Rule: "deny", Server: server, Tool: tool,
				Reason: fmt.Sprintf("tool %s/%s is denied by deny pattern %q", server, tool, pat)}
		}
	}
	if len(p.Allow) == 0 {
		return nil
	}
	for _, pat := range p.Allow {
		if Match(pat, server, tool) {
			return nil
		}
	}
	return &Violation{Rule: "allow", Server: server, Tool: tool,
		Reason: fmt.Sprintf("tool %s/%s is not allowed (allow: %s)", server, tool, quoteList(p.Allow))}
}

// CheckArguments applies the constraints matching server/tool to a call's
// arguments (a JSON object; empty or null means no arguments). Pass the
// real arguments, after untokenizing: the checks are about where data
// actually goes.
func (p *Policy) CheckArguments(server, tool string, args json.RawMessage) error {
	if p == nil {
		return nil
	}
	var cs []*Constraint
	for _, c := range p.Constraints {
		if Match(c.Tool, server, tool) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	obj := map[string]any{}
	if t := bytes.TrimSpace(args); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			return &Violation{Rule: "constraint", Server: server, Tool: tool,
				Reason: fmt.Sprintf("%s/%s arguments are not a JSON object, so its constraints cannot be checked", server, tool)}
		}
	}
	for _, c := range cs {
		if err := c.check(server, tool, obj); err != nil {
			return err
		}
	}
	return nil
}

// CheckToolCall is CheckTool, then CheckArguments.
func (p *Policy) CheckToolCall(server, tool string, args json.RawMessage) error {
	if err := p.CheckTool(server, tool); err != nil {
		return err
	}
	return p.CheckArguments(server, tool, args)
}

// CheckCode refuses code matching a deny_code pattern. This is defence in
// depth against obvious attempts, with a message the agent can act on;
// code can build any string at run time, so the sandbox, not this check,
// is the boundary.
func (p *Policy) CheckCode(code string) error {
	if p == nil {
		return nil
	}
	for _, re := range p.DenyCode {
		if re.MatchString(code) {
			return &Violation{Rule: "deny_code", Reason: fmt.Sprintf("code matches deny_code pattern %q", re.String())}
		}
	}
	return nil
}

// CheckOutput refuses output larger than max_output.
func (p *Policy) CheckOutput(size int) error {
	if p == nil || p.MaxOutput == 0 || int64(size) <= p.MaxOutput {
		return nil
	}
	return &Violation{Rule: "max_output",
		Reason: fmt.Sprintf("output of %s exceeds max_output (%s)", FormatSize(int64(size)), FormatSize(p.MaxOutput))}
}

// Counter counts the tool calls of one execution. It is safe for
// concurrent use.
type Counter struct {
	max int
	n   atomic.Int64
}

// NewCounter returns a counter for one execution.
func (p *Policy) NewCounter() *Counter {
	if p == nil {
		return &Counter{}
	}
	return &Counter{max: p.MaxToolCalls}
}

// Add counts a call and refuses it past max_tool_calls. Every attempt
// counts, denied ones too, so a loop of refused calls is bounded as well.
func (c *Counter) Add() error {
	n := c.n.Add(1)
	if c.max > 0 && n > int64(c.max) {
		return &Violation{Rule: "max_tool_calls",
			Reason: fmt.Sprintf("execution exceeded max_tool_calls (%d)", c.max)}
	}
	return nil
}

// Count returns the calls counted so far.
func (c *Counter) Count() int { return int(c.n.Load()) }

func (c *Constraint) check(server, tool string, args map[string]any) error {
	v, ok := lookup(args, c.Argument)
	if !ok || v == nil {
		if c.Required {
			return c.violation(server, tool, c.Argument, "is required")
		}
		return nil
	}
	if list, isList := v.([]any); isList {
		for i, e := range list {
			if err := c.checkValue(server, tool, fmt.Sprintf("%s[%d]", c.Argument, i), e); err != nil {
				return err
			}
		}
		return nil
	}
	return c.checkValue(server, tool, c.Argument, v)
}

func (c *Constraint) checkValue(server, tool, arg string, v any) error {
	s, isString := v.(string)
	if (c.Prefix != "" || c.Pattern != nil) && !isString {
		return c.violation(server, tool, arg, "must be a string")
	}
	if c.Prefix != "" && !hasPrefix(s, c.Prefix) {
		return c.violation(server, tool, arg, fmt.Sprintf("must start with %q", c.Prefix))
	}
	if c.Pattern != nil && !c.Pattern.MatchString(s) {
		return c.violation(server, tool, arg, fmt.Sprintf("must match %q", c.Pattern.String()))
	}
	if c.Max != nil || c.Min != nil {
		n, isNum := v.(json.Number)
		f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
		if !isNum || err != nil {
			return c.violation(server, tool, arg, "must be a number")
		}
		if c.Max != nil && f.Cmp(c.Max) > 0 {
			return c.violation(server, tool, arg, "must be at most "+c.Max.Text('g', -1))
		}
		if c.Min != nil && f.Cmp(c.Min) < 0 {
			return c.violation(server, tool, arg, "must be at least "+c.Min.Text('g', -1))
		}
	}
	if len(c.OneOf) > 0 && !oneOf(v, c.OneOf) {
		return c.violation(server, tool, arg, "must be one of "+quoteList(c.OneOf))
	}
	return nil
}

func (c *Constraint) violation(server, tool, arg, what string) error {
	return &Violation{Rule: "constraint", Server: server, Tool: tool, Argument: arg,
		Reason: fmt.Sprintf("%s/%s argument %q %s", server, tool, arg, what)}
}

// hasPrefix is a path-aware prefix test for prefixes starting with "/".
func hasPrefix(s, prefix string) bool {
	if !strings.HasPrefix(prefix, "/") {
		return strings.HasPrefix(s, prefix)
	}
	if !strings.HasPrefix(s, "/") {
		return false // relative: resolved by the server, not by us
	}
	dir, p := path.Clean(prefix), path.Clean(s)
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

func oneOf(v any, allowed []string) bool {
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case json.Number:
		text = x.String()
	case bool:
		text = strconv.FormatBool(x)
	default:
		return false
	}
	for _, a := range allowed {
		if a == text {
			return true
		}
		if n, isNum := v.(json.Number); isNum && sameNumber(string(n), a) {
			return true
		}
	}
	return false
}

func sameNumber(a, b string) bool {
	fa, _, errA := big.ParseFloat(a, 10, 256, big.ToNearestEven)
	fb, _, errB := big.ParseFloat(b, 10, 256, big.ToNearestEven)
	return errA == nil && errB == nil && fa.Cmp(fb) == 0
}

// lookup finds a dotted argument path in decoded JSON.
func lookup(obj map[string]any, name string) (any, bool) {
	if v, ok := obj[name]; ok {
		return v, true // a key that itself contains dots
	}
	var cur any = obj
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}
