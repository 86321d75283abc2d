// Command cexec-plugin-sandbox-bwrap is cexec's default sandbox backend:
// bubblewrap containers, each with a warm Python zygote from the standard
// runtime (pluginapi/sandbox/runtime).
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-bwrap/internal/bwrap"
)

func main() {
	p := bwrap.New(pluginapi.Logger())
	defer p.Close()
	sandbox.Serve(p)
}
