package pipeline

import (
	"context"
	"errors"

	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/pluginapi"
)

// outcome classifies an execution for metrics and the audit log: refused
// (a limit or the request's own fault kept it from starting), cancelled
// (its request ended first), failed (never ran otherwise), denied (the policy or a guard refused the code),
// timeout, error (the program failed) or ok.
func outcome(out *CodeResult, err error) string {
	switch {
	// The errors the control API answers with RESOURCE_EXHAUSTED and
	// INVALID_ARGUMENT: the caller's to act on, unlike a backend down.
	case errors.Is(err, pluginapi.ErrResourceExhausted) || errors.Is(err, pluginapi.ErrInvalidArgument):
		return metrics.OutcomeRefused
	case errors.Is(err, context.Canceled):
		// A client's abort or shutdown, not a backend to look into.
		return metrics.OutcomeCancelled
	case err != nil || out == nil:
		return metrics.OutcomeFailed
	case out.Error != nil && out.Error.Type == TypeDenied:
		return metrics.OutcomeDenied
	case out.TimedOut:
		return metrics.OutcomeTimeout
	case out.Error != nil || out.ExitCode != 0:
		return metrics.OutcomeError
	}
	return metrics.OutcomeOK
}
