// Package codegen is the plugin API for code generators: a generator turns a
// task in words into a Python program over the selected tool stubs.
package codegen

import (
	"context"
	"encoding/json"

	"github.com/cexec/cexec/pluginapi"
)

// APIVersion is the codegen API version this package implements.
const APIVersion = "v1"

// Tool is a selected tool with the stub source an agent would read.
type Tool struct {
	ID          string
	Server      string
	Name        string
	Description string
	// Module is the Python import path, for example "servers.filesystem".
	Module string
	// Function is the stub's Python function name.
	Function    string
	StubSource  string
	InputSchema json.RawMessage
}

// Skill is a reusable program from the workspace or the shared skills.
type Skill struct {
	Name        string
	Description string
	Source      string
}

// Attempt is a previous try that failed, for repair.
type Attempt struct {
	Code  string
	Error string
}

// GenerateRequest is everything a generator may use to write the program.
type GenerateRequest struct {
	Task     string
	Tools    []Tool
	Skills   []Skill
	Language string // "python"
	// Previous is set when the pipeline asks for a repair.
	Previous *Attempt
	// WorkspaceListing lists paths under /workspace, relative to it.
	WorkspaceListing []string
}

// Usage counts model tokens; zero for generators that use no model.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
}

// GenerateResponse carries the program. Code is empty when the generator
// could not handle the task; Diagnostics then say why and the pipeline tries
// the next generator in its chain.
type GenerateResponse struct {
	Code        string
	Diagnostics pluginapi.Diagnostics
	Usage       Usage
	Model       string
}

// Codegen is implemented by code generator plugins and, on the host side, by
// the gRPC client that talks to one.
type Codegen interface {
	pluginapi.Base
	Generate(ctx context.Context, req GenerateRequest) (GenerateResponse, error)
}
