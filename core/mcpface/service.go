package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The interfaces below are everything the face needs of the daemon. Each is
// small so that daemon.Run can adapt the real parts (catalog, selector,
// pipeline, workspace, PII vault) with a few lines, and tests can supply
// their own.
//
// Implementations must be safe for concurrent use: the face serves many
// sessions at once.
//
// Errors: return errors wrapping pluginapi.ErrNotFound for unknown names,
// pluginapi.ErrInvalidArgument for bad input, pluginapi.ErrDenied for policy
// refusals and pluginapi.ErrResourceExhausted for limits. The face turns
// every error into an isError result whose text is the error's message,
// less the sentinels' text at its end, and adds what the agent can do about
// it (the known servers, tools, skills or workflows for ErrNotFound).

// Scope says on whose behalf a call runs. The transport fills it in: Tenant
// from the bearer token (TCP) or the tenant header (the daemon's private
// unix socket); Session is the MCP session id, or the session execute_code
// was asked to continue. Session ids are valid workspace session ids.
type Scope struct {
	Tenant  string
	Session string
}

// Server is an upstream MCP server, or a package of local tools, as the
// tenant sees it.
type Server struct {
	// Name is the server's name in cexec.hcl (the one list_tools and
	// call_tool take, as is the package name).
	Name string
	// Package is the Python package sandboxed code imports its tools from:
	// servers.<package>.
	Package string
	// State is the connection state, e.g. "connected", "connecting",
	// "failed"; local tool packages are "local".
	State string
	// Tools counts the server's tools.
	Tools int
	// Error is why the server is not connected, if it is not.
	Error string
}

// Tool is one tool of the catalog.
type Tool struct {
	// Server and Name are the server's and the tool's MCP names.
	Server string
	Name   string
	Title  string
	// Description is the upstream description in full.
	Description string
	// Import is the statement code uses: from servers.fs import read_file.
	Import string
	// Signature is the Python function signature on one line.
	Signature string
	// Path is the stub file relative to the stub tree's parent, e.g.
	// servers/filesystem/read_file.py; the resource URI is cexec://<Path>.
	Path string
	// OutputSchema is an upstream tool's output schema (nil when it
	// declares none); search_tools renders what a call returns from it.
	OutputSchema json.RawMessage
	// Local is set for a hand-written local tool, whose signature already
	// says what it returns.
	Local bool
}

// Hit is one search result: a tool, or a shared skill.
type Hit struct {
	Server string
	Tool   string
	// Skill names a skill hit, imported from skills.<Skill>; Server and
	// Tool are empty then.
	Skill string
	Score float64
}

// Catalog lists the servers and tools a tenant may use and their stubs.
type Catalog interface {
	// Servers lists the servers the tenant may use, in a stable order.
	Servers(ctx context.Context, sc Scope) ([]Server, error)
	// Tools lists the tools of one server, or of every server the tenant
	// may use when server is "". An unknown or forbidden server is an
	// error wrapping pluginapi.ErrNotFound.
	Tools(ctx context.Context, sc Scope, server string) ([]Tool, error)
	// StubSource returns the Python source of a tool's stub (for a local
	// tool, the function's source).
	StubSource(ctx context.Context, sc Scope, server, tool string) (string, error)
	// LocalFile returns a module of a local tools package by its Path (a
	// local Tool's), read-only and confined to the servers folder. A path
	// no tool of the tenant has wraps pluginapi.ErrNotFound.
	LocalFile(ctx context.Context, sc Scope, path string) (string, error)
}

// Searcher finds tools and shared skills for a task description. The
// tenant's own skills are not searched (one index serves every tenant): the
// face matches them itself.
type Searcher interface {
	// Search returns at most limit tools the tenant may use and shared
	// skills, best first.
	Search(ctx context.Context, sc Scope, query string, limit int) ([]Hit, error)
}

// ExecError is how a program failed: an uncaught exception with its
// traceback, a timeout, or a sandbox that died.
type ExecError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

// ToolStat sums the upstream calls one program made to one tool.
type ToolStat struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Calls  int    `json:"calls"`
	Failed int    `json:"failed"`
	// TotalMS and MaxMS are the summed and the longest call time.
	TotalMS float64 `json:"total_ms"`
	MaxMS   float64 `json:"max_ms"`
	// LastError is the message of the tool's last failed call.
	LastError string `json:"last_error,omitempty"`
}

// ToolCalls summarizes the upstream calls of one execution.
type ToolCalls struct {
	Calls  int `json:"calls"`
	Failed int `json:"failed"`
	// Refused counts calls refused by the execution's call limit.
	Refused int `json:"refused,omitempty"`
	// TotalMS is the time spent in tool calls, summed.
	TotalMS float64    `json:"total_ms"`
	Tools   []ToolStat `json:"tools,omitempty"`
}

// Execution is the outcome of running one program.
type Execution struct {
	// Stdout and Stderr are what the program wrote.
	Stdout string
	Stderr string
	// OutputTruncated is set when the sandbox cut the output at its own
	// limit (the face caps what it returns separately).
	OutputTruncated bool
	// Result is the value the program passed to cexec.result(), or nil.
	Result json.RawMessage
	// Error is set when the program failed with an exception.
	Error *ExecError
	// ExitCode is the program's exit status: non-zero after sys.exit(N),
	// sys.exit("message") (1) or os._exit(N), which are failures too.
	ExitCode int
	TimedOut bool
	Calls    ToolCalls
	Duration time.Duration
	// Tokenized says the texts above (outputs, result, error, the tool
	// calls' servers, tools and errors, the attachments' texts) are
	// model-facing already: PII tokenized in the scope's session and held
	// to its max_output. The face then adds only its own wording and does
	// not tokenize again.
	Tokenized bool
	// Attachments are returned as MCP content beside the text, in order.
	Attachments []Attachment
	// Warnings are cexec's own remarks on the execution, for the agent:
	// that the session's persistent interpreter had ended and the program
	// ran without its earlier globals.
	Warnings []string
}

// Executor runs agent code: execute_code. The implementation untokenizes PII
// tokens in the code, runs it in the tenant's sandbox and records it in the
// session's log; the face tokenizes what comes back unless the Execution
// says it is Tokenized.
type Executor interface {
	Execute(ctx context.Context, sc Scope, p Program) (Execution, error)
}

// Program is what execute_code runs.
type Program struct {
	Code string
	// Persistent runs the program in its session's persistent interpreter:
	// the globals it leaves (variables, functions, imports) are there for
	// the session's next persistent programs.
	Persistent bool
}

// ToolCaller makes one upstream call for the agent (call_tool) on the path
// a program's calls take: allowed servers, policy and guards, PII tokens
// restored in the arguments, argument validation and size limits, the
// session log. The Execution's Result is the call's value, or its Error
// the failure (Type as cexec.ToolError's); Tokenized as for Executor.
type ToolCaller interface {
	CallTool(ctx context.Context, sc Scope, server, tool string, args json.RawMessage) (Execution, error)
}

// TaskResult is the outcome of execute_task.
type TaskResult struct {
	// Code is the program that ran last.
	Code string
	// Attempts counts the programs generated (1 + repairs).
	Attempts  int
	Execution Execution
}

// TaskRunner turns a task description into a program and runs it:
// execute_task (select → generate → guard → execute → repair). The face
// offers execute_task only when Options.Tasks is set, that is when a code
// generator is configured.
type TaskRunner interface {
	RunTask(ctx context.Context, sc Scope, task string) (TaskResult, error)
}

// StateFile describes one of a tenant's state files.
type StateFile struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// StateStore is the tenant's persistent state (/workspace/state in the
// sandbox): JSON values under names ending in .json, .yaml or .yml.
type StateStore interface {
	ListState(ctx context.Context, sc Scope) ([]StateFile, error)
	// GetState returns the value as JSON; an unknown name wraps
	// pluginapi.ErrNotFound.
	GetState(ctx context.Context, sc Scope, name string) (json.RawMessage, error)
	SaveState(ctx context.Context, sc Scope, name string, value json.RawMessage) error
}

// VersionedState is a StateStore with compare-and-set saves: get_state
// then reports each value's version and save_state takes one.
type VersionedState interface {
	// LoadState is GetState with the value's version.
	LoadState(ctx context.Context, sc Scope, name string) (value json.RawMessage, version string, err error)
	// SaveStateIf saves only while the stored value is at version ("":
	// does not exist); otherwise its error wraps ErrStateConflict.
	SaveStateIf(ctx context.Context, sc Scope, name string, value json.RawMessage, version string) error
}

// ErrStateConflict is a versioned save that found another version.
var ErrStateConflict = errors.New("state changed since it was read")

// Skill is reusable code saved by an agent (or shared by the operator).
type Skill struct {
	Name        string
	Description string
	// Import is the module code imports: skills.<name>.
	Import string
	// Shared skills are read-only and common to all tenants.
	Shared bool
	// Instructions (the SKILL.md body) and Code are filled in by GetSkill.
	Instructions string
	Code         string
	// Problem says why a folder of the tenant's skills/ is not a usable
	// skill (BrokenSkills only).
	Problem string
}

// SkillStore holds a tenant's skills and the shared ones.
type SkillStore interface {
	ListSkills(ctx context.Context, sc Scope) ([]Skill, error)
	// GetSkill returns a skill with its instructions and code; an unknown
	// name wraps pluginapi.ErrNotFound.
	GetSkill(ctx context.Context, sc Scope, name string) (Skill, error)
	// SaveSkill creates or replaces one of the tenant's skills. Code that
	// does not compile is an error wrapping pluginapi.ErrInvalidArgument
	// whose message names the line.
	SaveSkill(ctx context.Context, sc Scope, name, description, code string) (Skill, error)
	// BrokenSkills lists the tenant's skill folders that do not make a
	// skill, each with its Problem.
	BrokenSkills(ctx context.Context, sc Scope) ([]Skill, error)
}

// Tokenizer replaces PII with tokens such as [EMAIL_1] before anything
// leaves through the face; tokens are per (tenant, session), so the same
// value gets the same token for the whole session and the executor can put
// the values back in code. An error means the text must not be passed on.
type Tokenizer interface {
	Tokenize(ctx context.Context, sc Scope, text string) (string, error)
	// TokenizeJSON tokenizes every string in a JSON value, keys included.
	TokenizeJSON(ctx context.Context, sc Scope, value json.RawMessage) (json.RawMessage, error)
}

// ReplyTokenizer is a Tokenizer that can also do a reply's text and
// structured value in one pass (one round trip to the guard plugins
// instead of two); the face uses it when the Tokenizer has it.
type ReplyTokenizer interface {
	TokenizeReply(ctx context.Context, sc Scope, text string, structured json.RawMessage) (string, json.RawMessage, error)
}

// Untokenized is the Tokenizer of a daemon without a guard plugin: nothing
// detects PII, so text leaves as it is.
type Untokenized struct{}

// Tokenize returns text unchanged.
func (Untokenized) Tokenize(_ context.Context, _ Scope, text string) (string, error) {
	return text, nil
}

// TokenizeJSON returns value unchanged.
func (Untokenized) TokenizeJSON(_ context.Context, _ Scope, value json.RawMessage) (json.RawMessage, error) {
	return value, nil
}
