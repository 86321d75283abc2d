// Command cexec-plugin-sandbox-microsandbox runs sandboxed code in
// microVMs through microsandbox: the msb 0.7 CLI on a KVM host, or a
// 0.2-era msb server. Each microVM keeps a warm Python zygote from the
// standard runtime (pluginapi/sandbox/runtime).
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-microsandbox/internal/msb"
)

func main() {
	p := msb.New(pluginapi.Logger())
	defer p.Close()
	sandbox.Serve(p)
}
