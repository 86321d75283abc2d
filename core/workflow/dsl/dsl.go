// Package dsl loads and validates workflow documents: the CNCF Serverless
// Workflow DSL 1.0.x (the Open Workflow Specification), parsed and checked
// with serverlessworkflow/sdk-go/v3. It is the only package that imports
// the SDK, so moving to its renamed v4 module is an import swap here.
//
// The SDK checks the document's structure but reports no lines, so Load
// reads the source a second time as a yaml.v3 node tree (JSON is YAML) and
// gives every problem, its own checks' and the SDK's, the line of the node
// it is about. Tasks cexec cannot execute are rejected here, never at run
// time.
package dsl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"
	"github.com/serverlessworkflow/sdk-go/v3/model"
	"github.com/serverlessworkflow/sdk-go/v3/parser"
	"gopkg.in/yaml.v3"
)

// Model types the engine executes; aliases so that callers never import
// the SDK themselves.
type (
	Workflow          = model.Workflow
	TaskList          = model.TaskList
	TaskItem          = model.TaskItem
	Task              = model.Task
	TaskBase          = model.TaskBase
	CallFunction      = model.CallFunction
	RunTask           = model.RunTask
	SetTask           = model.SetTask
	SwitchTask        = model.SwitchTask
	ForTask           = model.ForTask
	ForkTask          = model.ForkTask
	TryTask           = model.TryTask
	TryTaskCatch      = model.TryTaskCatch
	RaiseTask         = model.RaiseTask
	WaitTask          = model.WaitTask
	ListenTask        = model.ListenTask
	DoTask            = model.DoTask
	Duration          = model.Duration
	RetryPolicy       = model.RetryPolicy
	Schema            = model.Schema
	Error             = model.Error
	FlowDirective     = model.FlowDirective
	EventFilter       = model.EventFilter
	RuntimeExpression = model.RuntimeExpression
)

// Flow directives.
const (
	FlowContinue = string(model.FlowDirectiveContinue)
	FlowExit     = string(model.FlowDirectiveExit)
	FlowEnd      = string(model.FlowDirectiveEnd)
)

// Document is a loaded, valid workflow document.
type Document struct {
	// File is the name errors are reported under.
	File string
	// Source is the document as it was read.
	Source   []byte
	Workflow *Workflow
}

// Name is the document's namespace/name:version.
func (d *Document) Name() string {
	doc := d.Workflow.Document
	return doc.Namespace + "/" + doc.Name + ":" + doc.Version
}

// Summary is the document's summary, else its title.
func (d *Document) Summary() string {
	if s := d.Workflow.Document.Summary; s != "" {
		return s
	}
	return d.Workflow.Document.Title
}

// RequiredInput lists the required fields of the input schema, if any.
func (d *Document) RequiredInput() []string {
	in := d.Workflow.Input
	if in == nil || in.Schema == nil {
		return nil
	}
	doc, _ := in.Schema.Document.(map[string]any)
	req, _ := doc["required"].([]any)
	var out []string
	for _, r := range req {
		if s, ok := r.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Diagnostic is one problem in a document, at a line.
type Diagnostic struct {
	File         string
	Line, Column int
	Message      string
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Column, d.Message)
}

// Diagnostics is the error of a document that does not load.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Load parses and validates a document (YAML or JSON). A document that is
// not valid, or that uses what cexec does not execute, is a Diagnostics
// error naming each problem's line.
func Load(file string, src []byte) (*Document, error) {
	return LoadWith(file, src, Options{})
}

// Options add the daemon's own checks to Load.
type Options struct {
	// Server, when set, says whether a call: mcp task's with.server names
	// a configured upstream.
	Server func(name string) bool
	// Journaled loads the document of a run that started under an
	// earlier cexec: checks that only catch mistakes earlier (expressions,
	// durations, retry limits) do not stop it from resuming; the run
	// meets such a mistake at its task, as it would have then.
	Journaled bool
}

// LoadWith is Load with the checks of opts.
func LoadWith(file string, src []byte, opts Options) (*Document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, Diagnostics{syntaxDiag(file, err)}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, Diagnostics{{File: file, Line: 1, Column: 1, Message: "a workflow document is a mapping with document and do"}}
	}
	c := &checker{file: file, server: opts.Server, journaled: opts.Journaled}
	c.document(root.Content[0])
	if len(c.diags) > 0 {
		return nil, c.diags
	}
	// The SDK's own YAML reading follows YAML 1.1, where a key n or y is a
	// boolean; yaml.v3 reads YAML 1.2, where it is the string it looks like.
	var tree any
	if err := root.Decode(&tree); err != nil {
		return nil, Diagnostics{syntaxDiag(file, err)}
	}
	js, err := json.Marshal(tree)
	if err != nil {
		return nil, Diagnostics{{File: file, Line: 1, Column: 1, Message: "not representable as JSON: " + err.Error()}}
	}
	wf, err := parser.FromJSONSource(js)
	if err != nil {
		return nil, sdkDiags(file, root.Content[0], err)
	}
	return &Document{File: file, Source: src, Workflow: wf}, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func syntaxDiag(file string, err error) Diagnostic {
	line := 1
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))
	return Diagnostic{File: file, Line: line, Column: 1, Message: "syntax: " + msg}
}

// sdkDiags places the SDK's errors: validator field errors by their
// struct path, unmarshal errors by the task they name; anything else at
// the document's first line.
func sdkDiags(file string, top *yaml.Node, err error) Diagnostics {
	var ves validator.ValidationErrors
	if errors.As(err, &ves) {
		// The validator reaches a task's fields twice, through the Task
		// interface and through the task's embedded struct (do[0].set and
		// do[0].setTask.set): both name one place of the document.
		var out Diagnostics
		for _, fe := range ves {
			n := nodeAtNamespace(top, fe.Namespace())
			d := Diagnostic{File: file, Line: n.Line, Column: n.Column,
				Message: fmt.Sprintf("%s: fails the %q rule%s", yamlPath(fe.Namespace()), fe.Tag(), param(fe.Param()))}
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
		return out
	}
	n := top
	if m := quotedRE.FindStringSubmatch(err.Error()); m != nil {
		if k := findKey(top, m[1]); k != nil {
			n = k
		}
	}
	return Diagnostics{{File: file, Line: n.Line, Column: n.Column, Message: err.Error()}}
}

func param(p string) string {
	if p == "" {
		return ""
	}
	return " (" + p + ")"
}

var quotedRE = regexp.MustCompile(`'([^']+)'`)

// findKey finds the first mapping key named name anywhere under n.
func findKey(n *yaml.Node, name string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				return n.Content[i]
			}
			if k := findKey(n.Content[i+1], name); k != nil {
				return k
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if k := findKey(c, name); k != nil {
				return k
			}
		}
	}
	return nil
}

var segRE = regexp.MustCompile(`^([A-Za-z]+)(?:\[(\d+)\])?$`)

// nodeAtNamespace follows a validator namespace (Workflow.Do[0].Task.With)
// down the node tree as far as it matches, and returns the deepest node
// reached: the SDK's field names are its JSON keys capitalised, and its
// wrappers (Task, TaskBase, Value …) have no node of their own.
func nodeAtNamespace(top *yaml.Node, ns string) *yaml.Node {
	n := top
	segs := strings.Split(ns, ".")
	for _, s := range segs[1:] {
		m := segRE.FindStringSubmatch(s)
		if m == nil {
			break
		}
		if v := mapValueFold(n, m[1]); v != nil {
			n = v
		} else if n.Kind == yaml.MappingNode && len(n.Content) == 2 && (m[1] == "Task" || m[1] == "TaskBase") {
			n = n.Content[1]
		} else {
			continue
		}
		if m[2] != "" && n.Kind == yaml.SequenceNode {
			i, _ := strconv.Atoi(m[2])
			if i < len(n.Content) {
				n = n.Content[i]
			}
		}
	}
	return n
}

func mapValueFold(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if strings.EqualFold(n.Content[i].Value, key) {
			return n.Content[i+1]
		}
	}
	return nil
}

// embeddedTaskRE matches the SDK's embedded task structs (SetTask,
// WaitTask …) in a validator namespace: Go names with no key of their own.
var embeddedTaskRE = regexp.MustCompile(`^[A-Z][A-Za-z]*Task$`)

func yamlPath(ns string) string {
	segs := strings.Split(ns, ".")[1:]
	var b bytes.Buffer
	for _, s := range segs {
		if s == "Task" || s == "TaskBase" || embeddedTaskRE.MatchString(s) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if s != "" {
			b.WriteString(strings.ToLower(s[:1]) + s[1:])
		}
	}
	return b.String()
}
