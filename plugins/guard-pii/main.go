// Command cexec-plugin-guard-pii is the PII guard: it detects sensitive
// values (emails, phone numbers, SSNs, payment cards, IBANs, IP addresses,
// secrets and, with an NER endpoint, person names) so cexecd can replace
// them with tokens before anything reaches the model, and it can refuse
// code that reaches for obvious targets (/proc/<pid>/environ, ptrace,
// cloud metadata) as defence in depth behind the sandbox.
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/plugins/guard-pii/internal/pii"
)

func main() {
	guard.Serve(pii.New(pluginapi.Logger()))
}
