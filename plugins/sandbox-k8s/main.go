// Command cexec-plugin-sandbox-k8s is cexec's Kubernetes sandbox backend:
// pods claimed from kubernetes-sigs/agent-sandbox warm pools, each running
// the standard runtime's zygote over pods/exec.
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/plugins/sandbox-k8s/internal/k8s"
)

func main() {
	p := k8s.New(pluginapi.Logger())
	defer p.Close()
	sandbox.Serve(p)
}
