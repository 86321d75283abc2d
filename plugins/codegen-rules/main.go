// Command cexec-plugin-codegen-rules is the offline code generator: it writes
// programs from HCL rule files, so execute_task works without any LLM.
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/plugins/codegen-rules/internal/rules"
)

func main() {
	codegen.Serve(rules.New(pluginapi.Logger()))
}
