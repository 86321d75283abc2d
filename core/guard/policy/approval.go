package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// DefaultApprovalTimeout is how long a call waits for an approval when its
// rule sets no timeout.
const DefaultApprovalTimeout = 5 * time.Minute

// Hints are the MCP annotation names an approval rule can name.
var Hints = []string{"destructiveHint", "readOnlyHint", "idempotentHint", "openWorldHint"}

// Approval is one approval block: calls to the tools it matches wait for
// a person's yes (the agent's user through MCP elicitation, else an
// operator's `cexecctl approvals`), and fail when denied or not answered
// within Timeout.
type Approval struct {
	// Tools are tool patterns (see Match); Annotations are hint names
	// (Hints). A tool matches when it matches a pattern or its annotations
	// set one of the hints.
	Tools       []string
	Annotations []string
	Timeout     time.Duration
	// Range is the block's place in cexec.hcl; TimeoutRange the timeout
	// attribute's, nil when the block takes the default.
	Range        hcl.Range
	TimeoutRange *hcl.Range
}

// ToolHints are a tool's annotations as its server declared them (nil:
// not declared).
type ToolHints struct {
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// has reports whether the hint holds for the tool, taking the defaults
// of the MCP specification for a hint the server left out: a tool is
// destructive and open-world unless it says otherwise, and not read-only
// or idempotent; a read-only tool is never destructive. So a rule for
// destructiveHint also catches tools that declare nothing (fail closed).
func (h ToolHints) has(hint string) bool {
	val := func(p *bool, def bool) bool {
		if p == nil {
			return def
		}
		return *p
	}
	switch hint {
	case "readOnlyHint":
		return val(h.ReadOnly, false)
	case "destructiveHint":
		return !val(h.ReadOnly, false) && val(h.Destructive, true)
	case "idempotentHint":
		return val(h.Idempotent, false)
	case "openWorldHint":
		return val(h.OpenWorld, true)
	}
	return false
}

// Approval returns the first approval rule that covers a call to
// server/tool with hints, or nil when the call needs no approval.
func (p *Policy) Approval(server, tool string, hints ToolHints) *Approval {
	if p == nil {
		return nil
	}
	for _, a := range p.Approvals {
		if slices.ContainsFunc(a.Tools, func(pat string) bool { return Match(pat, server, tool) }) ||
			slices.ContainsFunc(a.Annotations, hints.has) {
			return a
		}
	}
	return nil
}

// Why says what made the rule apply to a call, for the question put to
// the user and for the log.
func (a *Approval) Why(server, tool string, hints ToolHints) string {
	for _, pat := range a.Tools {
		if Match(pat, server, tool) {
			return fmt.Sprintf("the tenant's policy asks for approval of tools matching %q", pat)
		}
	}
	var set []string
	for _, h := range a.Annotations {
		if hints.has(h) {
			set = append(set, h)
		}
	}
	return "the tenant's policy asks for approval of tools marked " + strings.Join(set, ", ")
}

type rawApproval struct {
	Tools       *hcl.Attribute `hcl:"tools,optional"`
	Annotations *hcl.Attribute `hcl:"annotations,optional"`
	Timeout     *hcl.Attribute `hcl:"timeout,optional"`
	DeclRange   hcl.Range      `hcl:",def_range"`
}

func (d *decoder) approval(ra *rawApproval) *Approval {
	a := &Approval{Timeout: DefaultApprovalTimeout, Range: ra.DeclRange}
	a.Tools = d.patterns(ra.Tools)
	hints, ranges, _ := d.list(ra.Annotations)
	for i, h := range hints {
		if !slices.Contains(Hints, h) {
			d.errorf(ranges[i], "Invalid annotation", "%q is not a tool annotation cexec knows; use one of %s.", h, quoteList(Hints))
			continue
		}
		a.Annotations = append(a.Annotations, h)
	}
	if s, ok := d.str(ra.Timeout); ok {
		t, err := time.ParseDuration(s)
		if err != nil || t <= 0 {
			d.errorf(ra.Timeout.Expr.Range(), "Invalid timeout", "%q must be a positive duration with a unit, like \"30s\" or \"5m\"; got %q.", "timeout", s)
		} else {
			a.Timeout, a.TimeoutRange = t, ra.Timeout.Expr.Range().Ptr()
		}
	}
	if ra.Tools == nil && ra.Annotations == nil {
		d.errorf(ra.DeclRange, "Approval matches nothing", "an approval block needs tools (tool patterns) or annotations (such as [\"destructiveHint\"]).")
	}
	return a
}
