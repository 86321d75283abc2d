// Package rules is the codegen-rules plugin: its Generator writes programs
// from rule files in HCL, which map a task, matched by a regular expression
// with named groups or by keyword sets, to a Python template over the tool
// stubs.
//
// A rule file holds rule blocks:
//
//	rule "list_files" {
//	  description = "List the files in a directory"
//	  pattern     = "(?i)^list (?:the )?files in (?P<path>\\S+)$"
//	  requires    = ["filesystem/list_directory"]
//	  defaults    = { path = "." }
//	  examples    = ["list files in notes"]
//	  template    = <<-PY
//	    from servers.filesystem import list_directory
//	    print(list_directory(path={{ .path }}))
//	  PY
//	}
//
// Instead of pattern, keywords = [["list", "show"], ["files"]] matches when
// every inner set has a word in the task; named groups of an optional
// capture regular expression then supply the values.
//
// Captured values reach the template only as Python literals: {{ .name }} is
// a quoted str, {{ .name.Int }} and {{ .name.Number }} are numeric literals
// and {{ .name.Arithmetic }} an arithmetic expression in Python's operators,
// as a str (the rule does not match when the capture is not one). Task text
// can therefore never inject code.
package rules

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
)

//go:embed builtin/*.hcl
var builtinFS embed.FS

// Rule is one parsed rule.
type Rule struct {
	Name        string
	Description string
	Requires    []string
	Examples    []string
	Source      string // file:line of the rule block

	pattern  *regexp.Regexp
	keywords [][]string
	capture  *regexp.Regexp
	defaults map[string]string
	tmpl     *template.Template
}

type fileSchema struct {
	Snippets []snippetSchema `hcl:"snippet,block"`
	Rules    []ruleSchema    `hcl:"rule,block"`
}

// snippetSchema is Python shared by the rules of one file, included with
// {{ template "name" . }}.
type snippetSchema struct {
	Name   string `hcl:"name,label"`
	Source string `hcl:"source"`
}

type ruleSchema struct {
	Name        string            `hcl:"name,label"`
	Description string            `hcl:"description,optional"`
	Pattern     string            `hcl:"pattern,optional"`
	Keywords    [][]string        `hcl:"keywords,optional"`
	Capture     string            `hcl:"capture,optional"`
	Requires    []string          `hcl:"requires,optional"`
	Defaults    map[string]string `hcl:"defaults,optional"`
	Examples    []string          `hcl:"examples,optional"`
	Template    string            `hcl:"template"`
	DeclRange   hcl.Range         `hcl:",def_range"`
}

// Set is an ordered list of rules; the first that matches wins.
type Set struct {
	Rules []*Rule
}

// Builtin returns the rules shipped with the plugin.
func Builtin() (*Set, hcl.Diagnostics) {
	return load(builtinFS, "builtin")
}

// LoadDir parses every *.hcl file in dir, in name order.
func LoadDir(dir string) (*Set, hcl.Diagnostics) {
	return load(os.DirFS(dir), ".")
}

func load(fsys fs.FS, dir string) (*Set, hcl.Diagnostics) {
	names, err := fs.Glob(fsys, filepath.Join(dir, "*.hcl"))
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "list rule files", Detail: err.Error()}}
	}
	sort.Strings(names)
	parser := hclparse.NewParser()
	set := &Set{}
	var diags hcl.Diagnostics
	seen := map[string]string{}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "read rule file", Detail: err.Error()})
			continue
		}
		f, d := parser.ParseHCL(src, name)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		var fsch fileSchema
		if d := gohcl.DecodeBody(f.Body, nil, &fsch); d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		for _, rs := range fsch.Rules {
			r, d := compile(rs, fsch.Snippets)
			diags = append(diags, d...)
			if r == nil {
				continue
			}
			if prev, dup := seen[r.Name]; dup {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "duplicate rule " + r.Name,
					Detail: "first defined at " + prev, Subject: rs.DeclRange.Ptr()})
				continue
			}
			seen[r.Name] = r.Source
			set.Rules = append(set.Rules, r)
		}
	}
	return set, diags
}

func compile(rs ruleSchema, snippets []snippetSchema) (*Rule, hcl.Diagnostics) {
	bad := func(summary, detail string) (*Rule, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: fmt.Sprintf("rule %q: %s", rs.Name, summary), Detail: detail, Subject: rs.DeclRange.Ptr()}}
	}
	r := &Rule{
		Name: rs.Name, Description: rs.Description, Requires: rs.Requires, Examples: rs.Examples,
		Source: fmt.Sprintf("%s:%d", rs.DeclRange.Filename, rs.DeclRange.Start.Line), defaults: rs.Defaults,
	}
	switch {
	case rs.Pattern != "" && len(rs.Keywords) > 0:
		return bad("set pattern or keywords, not both", "")
	case rs.Pattern != "":
		re, err := regexp.Compile(rs.Pattern)
		if err != nil {
			return bad("invalid pattern", err.Error())
		}
		r.pattern = re
	case len(rs.Keywords) > 0:
		for _, set := range rs.Keywords {
			if len(set) == 0 {
				return bad("empty keyword set", "")
			}
			var lower []string
			for _, w := range set {
				lower = append(lower, strings.ToLower(w))
			}
			r.keywords = append(r.keywords, lower)
		}
		if rs.Capture != "" {
			re, err := regexp.Compile(rs.Capture)
			if err != nil {
				return bad("invalid capture", err.Error())
			}
			r.capture = re
		}
	default:
		return bad("needs a pattern or keywords", "")
	}
	t, err := template.New(rs.Name).Option("missingkey=error").Parse(rs.Template)
	if err != nil {
		return bad("invalid template", err.Error())
	}
	for _, sn := range snippets {
		if _, err := t.New(sn.Name).Parse(sn.Source); err != nil {
			return bad("invalid snippet "+sn.Name, err.Error())
		}
	}
	r.tmpl = t
	return r, nil
}

// Value is a captured value as the template sees it.
type Value string

// String renders the value as a Python str literal. JSON string syntax is a
// subset of Python's, so json.Marshal yields a valid, safe literal.
func (v Value) String() string {
	b, _ := json.Marshal(string(v))
	return string(b)
}

// ErrNoMatch is what a value's conversion returns when the capture is not
// what the rule needs (a number, an expression): the rule then does not
// match, as if its pattern had not.
var ErrNoMatch = errors.New("the rule does not apply")

// Int renders the value as a Python int literal, or fails the match.
func (v Value) Int() (string, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
	if err != nil {
		return "", fmt.Errorf("%q is not a whole number: %w", string(v), ErrNoMatch)
	}
	return strconv.FormatInt(n, 10), nil
}

// Number renders the value as a Python float or int literal, or fails the
// match.
func (v Value) Number() (string, error) {
	s := strings.TrimSpace(string(v))
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return s, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f || f > 1e308 || f < -1e308 {
		return "", fmt.Errorf("%q is not a number: %w", string(v), ErrNoMatch)
	}
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

// Match is a rule that matched a task, with its captures.
type Match struct {
	Rule   *Rule
	Values map[string]Value
}

// Find returns the matches of task in rule order.
func (s *Set) Find(task string) []Match {
	task = strings.TrimSpace(task)
	var out []Match
	for _, r := range s.Rules {
		if vals, ok := r.match(task); ok {
			out = append(out, Match{Rule: r, Values: vals})
		}
	}
	return out
}

func (r *Rule) match(task string) (map[string]Value, bool) {
	vals := map[string]Value{}
	for k, v := range r.defaults {
		vals[k] = Value(v)
	}
	re := r.pattern
	if re == nil {
		words := wordSet(task)
		for _, set := range r.keywords {
			hit := false
			for _, w := range set {
				if words[w] {
					hit = true
					break
				}
			}
			if !hit {
				return nil, false
			}
		}
		re = r.capture
		if re == nil {
			return vals, true
		}
	}
	m := re.FindStringSubmatch(task)
	if m == nil {
		return nil, false
	}
	for i, name := range re.SubexpNames() {
		if name != "" && m[i] != "" {
			vals[name] = Value(m[i])
		}
	}
	return vals, true
}

func wordSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127)
	}) {
		out[w] = true
	}
	return out
}

// Render executes the rule's template with the match's values.
func (m Match) Render() (string, error) {
	var buf bytes.Buffer
	if err := m.Rule.tmpl.Execute(&buf, m.Values); err != nil {
		return "", fmt.Errorf("render rule %s: %w", m.Rule.Name, err)
	}
	return buf.String(), nil
}

// Abilities says what the set's rules do, for a task none of them fits:
// one example task per rule (its description when it has none), and where
// to get more.
func (s *Set) Abilities() string {
	var b strings.Builder
	b.WriteString("the rules generator answers only tasks in these forms: ")
	for i, r := range s.Rules {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case len(r.Examples) > 0:
			b.WriteString(r.Examples[0])
		case r.Description != "":
			b.WriteString(r.Description)
		default:
			b.WriteString(r.Name)
		}
	}
	b.WriteString(". For other tasks add a rule file under rules_dir or configure the \"llm\" codegen plugin")
	return b.String()
}
