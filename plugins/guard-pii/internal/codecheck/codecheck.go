// Package codecheck denies agent code that matches configured patterns. It
// is defence in depth: the sandbox is the boundary that holds (no host
// environment, no credentials, no other processes to read), and a pattern
// list cannot stop a determined program, which can build any string at run
// time. What it does is refuse the obvious attempts early, with a message
// that tells the agent why, and leave an audit trail.
//
// Built-in rules are off until listed by name (see Builtin); custom rules
// are lists of RE2 patterns that must all match.
package codecheck

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cexec/cexec/pluginapi"
)

// Rule denies code in which every pattern of Match finds a match.
type Rule struct {
	Name string
	// Match holds RE2 patterns (Go regexp syntax); all must match.
	Match []string
	// Message tells the agent what was refused and why.
	Message string
}

// Builtin are the rules that code_checks can enable by name. None is on by
// default: each can refuse legitimate code (a script that reads its own
// environment through /proc, a debugger exercise using ptrace), so an
// operator opts in.
var Builtin = []Rule{
	{
		Name:    "proc_environ",
		Match:   []string{`/proc\b`, `/proc/\S*environ|['"]environ['"]`},
		Message: "reading process environments through /proc/<pid>/environ is not allowed",
	},
	{
		Name:    "proc_mem",
		Match:   []string{`/proc\b`, `/proc/\S*/mem\b|['"]mem['"]|process_vm_readv`},
		Message: "reading process memory through /proc/<pid>/mem is not allowed",
	},
	{
		Name:    "ptrace",
		Match:   []string{`\bctypes\b|\bcffi\b`, `\bptrace\b|PTRACE_(?:ATTACH|SEIZE|PEEK|POKE)`},
		Message: "calling ptrace through ctypes or cffi is not allowed",
	},
	{
		Name:    "cloud_metadata",
		Match:   []string{`169\.254\.169\.254|metadata\.google\.internal|\bfd00:ec2::254\b|100\.100\.100\.200`},
		Message: "contacting a cloud instance metadata service is not allowed",
	},
	{
		Name:    "docker_socket",
		Match:   []string{`docker\.sock|containerd\.sock|/run/podman/podman\.sock`},
		Message: "talking to a container runtime socket is not allowed",
	},
	{
		Name:    "ld_preload",
		Match:   []string{`\bLD_PRELOAD\b|/etc/ld\.so\.preload`},
		Message: "injecting libraries with LD_PRELOAD is not allowed",
	},
	{
		Name:    "dev_mem",
		Match:   []string{`/dev/(?:k?mem|port)\b`},
		Message: "accessing physical memory devices is not allowed",
	},
}

// BuiltinNames returns the names of the built-in rules, in order.
func BuiltinNames() []string {
	names := make([]string, len(Builtin))
	for i, r := range Builtin {
		names[i] = r.Name
	}
	return names
}

type compiled struct {
	name    string
	res     []*regexp.Regexp
	message string
}

// Checker holds compiled rules. It is immutable and safe for concurrent use.
type Checker struct {
	rules []compiled
}

// RuleError says which custom rule, and which field of it, is invalid.
type RuleError struct {
	// Index is the rule's position in the custom list; -1 for an unknown
	// built-in name.
	Index int
	// Field is "name", "match" or "message", or "" for a built-in name.
	Field string
	Err   error
}

func (e *RuleError) Error() string {
	if e.Index < 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("code rule %d: %s: %v", e.Index, e.Field, e.Err)
}

func (e *RuleError) Unwrap() error { return e.Err }

// New compiles the built-in rules named in enabled ("all" enables every
// one) and the custom rules.
func New(enabled []string, custom []Rule) (*Checker, error) {
	c := &Checker{}
	seen := map[string]bool{}
	for _, name := range enabled {
		if name == "all" {
			for _, r := range Builtin {
				seen[r.Name] = true
			}
			continue
		}
		if !slices.Contains(BuiltinNames(), name) {
			return nil, &RuleError{Index: -1, Err: fmt.Errorf("unknown code check %q (built-in: %s, or all)", name, strings.Join(BuiltinNames(), ", "))}
		}
		seen[name] = true
	}
	for _, r := range Builtin {
		if seen[r.Name] {
			c.rules = append(c.rules, compiled{name: r.Name, res: mustCompile(r.Match), message: r.Message})
		}
	}
	for i, r := range custom {
		if strings.TrimSpace(r.Name) == "" {
			return nil, &RuleError{Index: i, Field: "name", Err: errors.New("a rule needs a name")}
		}
		if seen[r.Name] {
			return nil, &RuleError{Index: i, Field: "name", Err: fmt.Errorf("rule name %q is already used", r.Name)}
		}
		seen[r.Name] = true
		if len(r.Match) == 0 {
			return nil, &RuleError{Index: i, Field: "match", Err: errors.New("a rule needs at least one pattern")}
		}
		cr := compiled{name: r.Name, message: r.Message}
		for k, p := range r.Match {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, &RuleError{Index: i, Field: "match", Err: fmt.Errorf("pattern %d: %w", k, err)}
			}
			cr.res = append(cr.res, re)
		}
		if cr.message == "" {
			cr.message = fmt.Sprintf("code matching rule %q is not allowed", r.Name)
		}
		c.rules = append(c.rules, cr)
	}
	return c, nil
}

func mustCompile(patterns []string) []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	return res
}

// Empty reports whether no rule is enabled.
func (c *Checker) Empty() bool { return len(c.rules) == 0 }

// maxSnippet caps the code quoted back in a diagnostic.
const maxSnippet = 120

// Check returns one error diagnostic per rule the code matches, quoting the
// line where the rule's last pattern first matched. No diagnostics means
// the code may run.
func (c *Checker) Check(code string) pluginapi.Diagnostics {
	var diags pluginapi.Diagnostics
	for _, r := range c.rules {
		var loc []int
		for _, re := range r.res {
			if loc = re.FindStringIndex(code); loc == nil {
				break
			}
		}
		if loc == nil {
			continue
		}
		line := strings.Count(code[:loc[0]], "\n") + 1
		from := strings.LastIndexByte(code[:loc[0]], '\n') + 1
		to := len(code)
		if nl := strings.IndexByte(code[loc[0]:], '\n'); nl >= 0 {
			to = loc[0] + nl
		}
		snippet := strings.TrimSpace(code[from:to])
		if len(snippet) > maxSnippet {
			n := maxSnippet
			for n > 0 && !utf8.RuneStart(snippet[n]) {
				n--
			}
			snippet = snippet[:n] + "…"
		}
		diags = append(diags, pluginapi.Diagnostic{
			Severity: pluginapi.SeverityError,
			Summary:  fmt.Sprintf("code denied by guard rule %q", r.name),
			Detail:   fmt.Sprintf("%s (line %d: %s); rewrite the code without it", r.message, line, snippet),
		})
	}
	return diags
}
