package dsl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/itchyny/gojq"
	"gopkg.in/yaml.v3"
)

// checker holds the problems found while walking the node tree.
type checker struct {
	file   string
	diags  Diagnostics
	errors map[string]bool // use.errors names
	retry  map[string]bool // use.retries names
	server func(string) bool
	// journaled skips the early checks (see Options.Journaled).
	journaled bool
	// vars are the $names an expression may use: the engine's and the
	// loop and catch names the document gives anywhere (not per scope:
	// a typo or an undefined function is what this catches).
	vars []string
}

// engineVars are the variables the engine gives every expression, or
// loops and catches by default.
var engineVars = []string{"$context", "$input", "$workflow", "$runtime", "$task", "$secrets", "$item", "$index", "$error"}

// docVars adds the names of for.each, for.at and catch.as under n.
func docVars(n *yaml.Node, out []string) []string {
	switch n.Kind {
	case yaml.MappingNode:
		for _, p := range pairs(n) {
			var names []string
			switch p[0].Value {
			case "for":
				names = []string{"each", "at"}
			case "catch":
				names = []string{"as"}
			}
			for _, name := range names {
				if _, v := value(p[1], name); v != nil && v.Kind == yaml.ScalarNode && v.Value != "" {
					out = append(out, "$"+v.Value)
				}
			}
			out = docVars(p[1], out)
		}
	case yaml.SequenceNode:
		for _, x := range n.Content {
			out = docVars(x, out)
		}
	}
	return out
}

func (c *checker) at(n *yaml.Node, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{File: c.file, Line: n.Line, Column: n.Column, Message: fmt.Sprintf(format, args...)})
}

// early reports a problem the run would otherwise meet at its task: not
// for a journaled document.
func (c *checker) early(n *yaml.Node, format string, args ...any) {
	if !c.journaled {
		c.at(n, format, args...)
	}
}

// pairs lists a mapping's keys and values.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
	}
	return out
}

func value(n *yaml.Node, key string) (k, v *yaml.Node) {
	for _, p := range pairs(n) {
		if p[0].Value == key {
			return p[0], p[1]
		}
	}
	return nil, nil
}

// Top-level keys and the tasks' shared keys cexec executes.
var (
	topKeys  = []string{"document", "input", "use", "do", "timeout", "output"}
	useKeys  = []string{"errors", "retries"}
	baseKeys = []string{"if", "input", "output", "export", "timeout", "then", "metadata"}
	// taskKinds maps a task's defining key to the other keys it may have.
	taskKinds = map[string][]string{
		"call":   {"with"},
		"run":    nil,
		"set":    nil,
		"switch": nil,
		"for":    {"while", "do"},
		"fork":   nil,
		"try":    {"catch"},
		"raise":  nil,
		"wait":   nil,
		"listen": nil,
		"do":     nil,
	}
	kindOrder = []string{"call", "run", "set", "switch", "for", "fork", "try", "raise", "wait", "listen", "do"}
)

func (c *checker) document(top *yaml.Node) {
	c.vars = docVars(top, slices.Clone(engineVars))
	for _, p := range pairs(top) {
		if !slices.Contains(topKeys, p[0].Value) {
			c.at(p[0], "%s: not supported by cexec (supported: %s)", p[0].Value, strings.Join(topKeys, ", "))
		}
	}
	_, doc := value(top, "document")
	if doc == nil {
		c.at(top, "document: missing (with dsl, namespace, name, version)")
	} else if k, dsl := value(doc, "dsl"); dsl == nil {
		c.at(doc, "document.dsl: missing; cexec runs DSL 1.0.x")
	} else if !strings.HasPrefix(dsl.Value, "1.0.") {
		c.at(k, "document.dsl: %q is not supported; cexec runs DSL 1.0.x", dsl.Value)
	}
	c.errors, c.retry = map[string]bool{}, map[string]bool{}
	if _, use := value(top, "use"); use != nil {
		for _, p := range pairs(use) {
			switch p[0].Value {
			case "errors":
				for _, e := range pairs(p[1]) {
					c.errors[e[0].Value] = true
				}
			case "retries":
				for _, r := range pairs(p[1]) {
					c.retry[r[0].Value] = true
					c.retryPolicy("use.retries."+r[0].Value, r[0], r[1])
				}
			default:
				c.at(p[0], "use.%s: not supported by cexec (supported: %s)", p[0].Value, strings.Join(useKeys, ", "))
			}
		}
	}
	c.timeout("", top)
	c.schemaHolder(top, "input")
	c.schemaHolder(top, "output")
	// The workflow's own input.from and output.as, like a task's.
	for _, key := range []string{"input", "output"} {
		if _, h := value(top, key); h != nil {
			c.exprs(h)
		}
	}
	if k, do := value(top, "do"); do == nil {
		c.at(top, "do: missing; a workflow needs a list of tasks")
	} else {
		c.taskList(k, do)
	}
}

// taskList checks a list of named tasks and their then targets.
func (c *checker) taskList(key, list *yaml.Node) {
	if list.Kind != yaml.SequenceNode {
		c.at(key, "%s: must be a list of named tasks (- name: {task})", key.Value)
		return
	}
	names := map[string]bool{}
	for _, item := range list.Content {
		if item.Kind == yaml.MappingNode && len(item.Content) == 2 {
			n := item.Content[0]
			if names[n.Value] {
				// then: would go to the first of them, and the journal
				// could not tell them apart.
				c.early(n, "task %s: another task of this list has that name; names must differ within a list", n.Value)
			}
			names[n.Value] = true
		}
	}
	for _, item := range list.Content {
		if item.Kind != yaml.MappingNode || len(item.Content) != 2 {
			c.at(item, "%s: each item must be one named task (- name: {task})", key.Value)
			continue
		}
		c.task(item.Content[0], item.Content[1], names)
	}
}

func (c *checker) flow(n *yaml.Node, names map[string]bool) {
	v := n.Value
	if v == FlowContinue || v == FlowExit || v == FlowEnd || names[v] {
		return
	}
	c.at(n, "then: %q is neither continue, exit, end nor a task of this list", v)
}

func (c *checker) task(name, t *yaml.Node, names map[string]bool) {
	if t.Kind != yaml.MappingNode {
		c.at(name, "task %s: must be a mapping", name.Value)
		return
	}
	kind := ""
	for _, k := range kindOrder {
		if kk, _ := value(t, k); kk != nil {
			if k == "do" && kind != "" {
				continue // for and try bodies
			}
			kind = k
			if k != "do" {
				break
			}
		}
	}
	if kind == "" {
		for _, p := range pairs(t) {
			if !slices.Contains(baseKeys, p[0].Value) {
				c.at(p[0], "task %s: %s is not a task cexec runs (supported: %s)", name.Value, p[0].Value, strings.Join(kindOrder, ", "))
				return
			}
		}
		c.at(name, "task %s: names no task (one of %s)", name.Value, strings.Join(kindOrder, ", "))
		return
	}
	for _, p := range pairs(t) {
		k := p[0].Value
		if k != kind && !slices.Contains(baseKeys, k) && !slices.Contains(taskKinds[kind], k) {
			c.at(p[0], "task %s: %s is not supported in a %s task", name.Value, k, kind)
		}
	}
	if _, then := value(t, "then"); then != nil {
		c.flow(then, names)
	}
	c.timeout("task "+name.Value+": ", t)
	c.schemaHolder(t, "input")
	c.schemaHolder(t, "output")
	c.schemaHolder(t, "export")
	c.exprs(t)
	k, v := value(t, kind)
	switch kind {
	case "call":
		c.call(name, k, v, t)
	case "run":
		c.run(name, v)
	case "switch":
		c.switchTask(v, names)
	case "for":
		if dk, do := value(t, "do"); do != nil {
			c.taskList(dk, do)
		} else {
			c.at(k, "task %s: for needs a do list", name.Value)
		}
	case "fork":
		if bk, br := value(v, "branches"); br != nil {
			c.taskList(bk, br)
		} else {
			c.at(k, "task %s: fork needs branches", name.Value)
		}
	case "try":
		c.taskList(k, v)
		c.catch(name, t)
	case "do":
		c.taskList(k, v)
	case "raise":
		if _, e := value(v, "error"); e != nil && e.Kind == yaml.ScalarNode && !c.errors[e.Value] {
			c.at(e, "task %s: raise names error %q, which use.errors does not define", name.Value, e.Value)
		}
	case "listen":
		c.listen(name, v)
	case "wait":
		c.duration("task "+name.Value+": wait", v)
	}
}

// retryPolicy checks a retry policy: its delay, and the limit without
// which the engine never retries.
func (c *checker) retryPolicy(what string, key, p *yaml.Node) {
	if _, d := value(p, "delay"); d != nil {
		c.duration(what+".delay", d)
	}
	_, limit := value(p, "limit")
	_, attempt := value(limit, "attempt")
	if _, count := value(attempt, "count"); count == nil {
		c.early(key, "%s: needs limit.attempt.count (the attempts in all, the first included); without it cexec does not retry", what)
	}
}

// timeout checks the duration of the timeout t holds, if any.
func (c *checker) timeout(prefix string, t *yaml.Node) {
	if _, to := value(t, "timeout"); to != nil {
		if _, after := value(to, "after"); after != nil {
			c.duration(prefix+"timeout.after", after)
		}
	}
}

func (c *checker) call(name, k, v, t *yaml.Node) {
	if v.Value != "mcp" {
		c.at(v, "task %s: call: %s is not supported; cexec calls MCP servers (call: mcp)", name.Value, v.Value)
		return
	}
	_, with := value(t, "with")
	if with == nil || with.Kind != yaml.MappingNode {
		c.at(k, "task %s: call: mcp needs with.server and with.tool (or with.method and with.parameters)", name.Value)
		return
	}
	if tk, _ := value(with, "transport"); tk != nil {
		c.at(tk, "task %s: with.transport: inline MCP transports are not allowed; name a server of cexec.hcl with with.server (its credentials stay there)", name.Value)
	}
	if _, s := value(with, "server"); s == nil || s.Kind != yaml.ScalarNode || s.Value == "" {
		c.at(with, "task %s: with.server: missing; name an mcp_server of cexec.hcl", name.Value)
	} else if c.server != nil && !IsExpr(s.Value) && !c.server(s.Value) {
		c.at(s, "task %s: with.server: %q is not an mcp_server of cexec.hcl", name.Value, s.Value)
	}
	mk, method := value(with, "method")
	_, tool := value(with, "tool")
	switch {
	case method == nil && tool == nil:
		c.at(with, "task %s: with needs tool (and arguments), or method and parameters", name.Value)
	case method != nil && tool != nil:
		c.at(mk, "task %s: with has both tool and method; use one", name.Value)
	case method != nil && !slices.Contains(Methods, method.Value):
		c.at(method, "task %s: with.method %q is not supported (supported: %s)", name.Value, method.Value, strings.Join(Methods, ", "))
	}
	for _, p := range pairs(with) {
		if !slices.Contains([]string{"server", "tool", "arguments", "method", "parameters", "transport"}, p[0].Value) {
			c.at(p[0], "task %s: with.%s is not supported in call: mcp", name.Value, p[0].Value)
		}
	}
}

// Methods are the MCP requests call: mcp makes.
var Methods = []string{"tools/call", "resources/read", "prompts/get"}

func (c *checker) run(name, v *yaml.Node) {
	sk, script := value(v, "script")
	if script == nil {
		for _, p := range pairs(v) {
			if p[0].Value != "await" {
				c.at(p[0], "task %s: run: %s is not supported; cexec runs scripts (run: {script: {language: python, code: ...}})", name.Value, p[0].Value)
				return
			}
		}
		c.at(v, "task %s: run needs a script", name.Value)
		return
	}
	if _, lang := value(script, "language"); lang == nil || lang.Value != "python" {
		at := sk
		if lang != nil {
			at = lang
		}
		c.at(at, "task %s: run.script.language must be python (the sandbox runs Python)", name.Value)
	}
	if srck, _ := value(script, "source"); srck != nil {
		c.at(srck, "task %s: run.script.source is not supported; put the program in code", name.Value)
	} else if _, code := value(script, "code"); code == nil {
		c.at(sk, "task %s: run.script needs code", name.Value)
	}
	for _, p := range pairs(script) {
		if p[0].Value == "environment" || p[0].Value == "stdin" {
			c.at(p[0], "task %s: run.script.%s is not supported; pass values in arguments", name.Value, p[0].Value)
		}
	}
}

func (c *checker) switchTask(v *yaml.Node, names map[string]bool) {
	if v.Kind != yaml.SequenceNode {
		c.at(v, "switch: must be a list of named cases")
		return
	}
	for _, item := range v.Content {
		for _, p := range pairs(item) {
			if _, then := value(p[1], "then"); then != nil {
				c.flow(then, names)
			}
		}
	}
}

func (c *checker) catch(name, t *yaml.Node) {
	ck, catch := value(t, "catch")
	if catch == nil {
		c.at(name, "task %s: try needs catch", name.Value)
		return
	}
	if rk, r := value(catch, "retry"); r != nil && r.Kind == yaml.ScalarNode && !c.retry[r.Value] {
		c.at(rk, "task %s: catch.retry names %q, which use.retries does not define", name.Value, r.Value)
	} else if r != nil && r.Kind == yaml.MappingNode {
		c.retryPolicy("task "+name.Value+": catch.retry", rk, r)
	}
	if dk, do := value(catch, "do"); do != nil {
		c.taskList(dk, do)
	}
	_ = ck
}

func (c *checker) listen(name, v *yaml.Node) {
	tk, to := value(v, "to")
	if to == nil || len(pairs(to)) == 0 {
		// A listen that waits for nothing could never be signalled.
		at := v
		if to != nil {
			at = to
		}
		c.at(at, "task %s: listen needs to (one or any)", name.Value)
		return
	}
	for _, p := range pairs(to) {
		if p[0].Value != "one" && p[0].Value != "any" {
			c.at(p[0], "task %s: listen.to.%s is not supported (supported: one, any)", name.Value, p[0].Value)
		}
	}
	_ = tk
}

// schemaHolder checks that input, output or export schemas are inline.
func (c *checker) schemaHolder(t *yaml.Node, key string) {
	_, h := value(t, key)
	if h == nil {
		return
	}
	if _, s := value(h, "schema"); s != nil {
		if rk, _ := value(s, "resource"); rk != nil {
			c.at(rk, "%s.schema.resource: external schemas are not supported; put the schema in document", key)
		}
		if _, f := value(s, "format"); f != nil && !strings.HasPrefix(f.Value, "json") {
			c.at(f, "%s.schema.format %q: only JSON Schema is supported", key, f.Value)
		}
	}
}

// exprs compiles every runtime expression among a task's own fields (not
// its sub-task lists, which are checked as tasks).
func (c *checker) exprs(t *yaml.Node) {
	// bare says a key's plain string is a jq program (if, when, in,
	// while) because it sits in the task's own structure, not inside a
	// value the task passes on (with, set, arguments …).
	var walk func(n *yaml.Node, key string, bare bool)
	walk = func(n *yaml.Node, key string, bare bool) {
		switch n.Kind {
		case yaml.ScalarNode:
			isBare := bare && (key == "if" || key == "when" || key == "in" || key == "while")
			if n.Tag == "!!str" && n.Value != "" && (IsExpr(n.Value) || isBare) {
				q, err := gojq.Parse(Unwrap(n.Value))
				if err == nil {
					_, err = gojq.Compile(q, gojq.WithVariables(c.vars))
				}
				if err != nil {
					c.early(n, "expression %q: %v", n.Value, err)
				}
			}
		case yaml.MappingNode:
			for _, p := range pairs(n) {
				switch p[0].Value {
				case "do", "branches", "try":
					if p[1].Kind == yaml.SequenceNode {
						continue
					}
				case "code", "document", "schema":
					continue
				}
				walk(p[1], p[0].Value, bare && !valueKeys[p[0].Value])
			}
		case yaml.SequenceNode:
			for _, x := range n.Content {
				walk(x, key, bare)
			}
		}
	}
	walk(t, "", true)
}

// valueKeys hold values a task passes on, where only ${ } is an
// expression.
var valueKeys = map[string]bool{"with": true, "set": true, "arguments": true, "parameters": true, "as": true, "from": true, "metadata": true}

// IsExpr says whether s is a runtime expression, ${ ... }.
func IsExpr(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}")
}

// Unwrap returns the jq program of a runtime expression (the text inside
// ${ }), or s itself when it is a bare expression (if, when, in, while).
func Unwrap(s string) string {
	t := strings.TrimSpace(s)
	if IsExpr(t) {
		return strings.TrimSpace(t[2 : len(t)-1])
	}
	return t
}
