package bridge

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/cexec/cexec/core/metrics"
)

// argsHash is the hex sha256 of a call's arguments.
func argsHash(args []byte) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// Outcome is the call's outcome as metrics and the audit log name it.
func (r *CallRecord) Outcome() string {
	switch {
	case r.OK:
		return metrics.OutcomeOK
	case r.ErrorType == TypeDenied:
		return metrics.OutcomeDenied
	}
	return metrics.OutcomeError
}

// record counts the call; a tool the catalog does not have counts under
// metrics.Unknown, so a program cannot mint series.
func (r *CallRecord) record(known bool) {
	server, tool := r.Server, r.Tool
	if !known {
		server, tool = metrics.Unknown, metrics.Unknown
	}
	metrics.ToolCall(server, tool, r.Outcome(), r.Duration)
}
