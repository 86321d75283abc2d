// Command cexec-plugin-codegen-rules is the offline code generator: it writes
// programs from HCL rule files, so execute_task works without any LLM.
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

func main() {
	codegen.Serve(&generator{log: pluginapi.Logger()})
}
