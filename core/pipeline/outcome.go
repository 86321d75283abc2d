package pipeline

import "github.com/cexec/cexec/core/metrics"

// outcome classifies an execution for metrics and the audit log: failed
// (never ran), denied (the policy or a guard refused the code), timeout,
// error (the program failed) or ok.
func outcome(out *CodeResult, err error) string {
	switch {
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
