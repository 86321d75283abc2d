// Package audit is cexecd's audit log: per tenant, what happened on its
// behalf (executions, tool calls, approvals, elicitations, sign-ins,
// policy denials), and for the daemon itself (config reloads). Each log is
// JSON lines in a folder of its own; every line carries the sha256 of the
// line before it and its own, so an edited, inserted or removed line
// breaks the chain and Verify names the first line that does not hold.
//
// # Format
//
//	{"seq":7,"prev":"<hex sha256 of line 6>","time":"...","tenant":"acme","type":"tool_call",...,"hash":"<hex>"}
//
// hash is the sha256 of the line's canonical form: the line without its
// `,"hash":"…"` member (so its bytes up to there, closed by "}"). prev of
// the first line ever is 64 zeros. The log never holds tool arguments or
// code, only their sha256 (args_sha256, code_sha256).
//
// # Files and rotation
//
// The current file is audit.jsonl. When a line would take it over
// rotate_size it is renamed audit-<first seq, 20 digits>.jsonl and a new
// audit.jsonl continues the chain (its first line's prev is the old file's
// last hash). The newest keep rotated files are kept; a chain whose first
// file was removed is verified from its first line on.
//
// # Where
//
// A tenant's log is <data_dir>/tenants/<id>/audit/, beside its sessions:
// outside the folder sandboxes mount, so sandboxed code can neither read
// nor forge it, and inside the tenant's file system image, so it counts
// in the tenant's disk quota (workspace.Manager.WithAuditDir). The
// daemon's own log is <data_dir>/audit/.
//
// The chain shows tampering by anyone who cannot also recompute the hashes
// after the edit (it is not signed): it detects edits by hand, partial
// restores and lost lines, and with an external copy of a recent hash,
// rewrites.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Event types.
const (
	TypeExecution    = "execution"
	TypeToolCall     = "tool_call"
	TypeApproval     = "approval"
	TypeElicitation  = "elicitation"
	TypeSignIn       = "sign_in"
	TypePolicyDenial = "policy_denial"
	TypeConfigReload = "config_reload"
)

// Event is one thing that happened. Only Type is required; Time defaults
// to now. Never put raw arguments, code or secrets in it: hash them
// (Hash).
type Event struct {
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	// Session is the session (or MCP session) it belongs to.
	Session string `json:"session,omitempty"`
	// Actor is who asked: "agent" (the MCP face), "operator" (the control
	// API), or a signed-in user.
	Actor   string `json:"actor,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Server  string `json:"server,omitempty"`
	Tool    string `json:"tool,omitempty"`
	// DurationMS is how long it took.
	DurationMS float64 `json:"duration_ms,omitempty"`
	ArgsSHA256 string  `json:"args_sha256,omitempty"`
	CodeSHA256 string  `json:"code_sha256,omitempty"`
	// Reason says why (a denial's rule, an error's type, what a reload
	// changed).
	Reason string `json:"reason,omitempty"`
	// Detail holds further short facts (an approval's id, a reload's
	// config file).
	Detail map[string]string `json:"detail,omitempty"`
}

// Hash is the hex sha256 of b, for ArgsSHA256 and CodeSHA256.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// maxReason caps Reason: it is a summary, and the log counts in the
// tenant's quota.
const maxReason = 500
