// Command cexec-plugin-sandbox-microsandbox runs sandboxed code in
// microVMs through microsandbox: the msb 0.7 CLI on a KVM host, or a
// 0.2-era msb server. Each microVM keeps a warm Python zygote from the
// standard runtime (pluginapi/sandbox/runtime).
package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-microsandbox/internal/msb"
)

func main() {
	p := msb.New(pluginapi.Logger())
	defer p.Close()
	// microVMs run detached from the plugin: when it is terminated rather
	// than shut down by cexecd, it removes them before it goes.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		_ = p.Close()
		os.Exit(0)
	}()
	sandbox.Serve(p)
}
