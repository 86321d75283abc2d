package testutil

import (
	"os"
	"testing"
)

// K8sCluster is the cluster of the opt-in TestCluster tests (`make
// test-cluster`), as scripts/test-cluster.sh env describes it:
// CEXEC_TEST_KUBECONFIG names the kubeconfig of a cluster with a node and
// the agent-sandbox v0.5.6 controller and extensions, CEXEC_TEST_K8S_IMAGE
// an image with /usr/bin/python3 that the node has, CEXEC_TEST_K8S_NAMESPACE
// the namespace (default "default").
type K8sCluster struct {
	Kubeconfig, Image, Namespace string
}

// K8sClusterOrSkip returns the cluster from the environment, or skips: the
// tests are opt-in (a plain skip, also under CI, which runs no cluster).
func K8sClusterOrSkip(t testing.TB) K8sCluster {
	t.Helper()
	c := K8sCluster{
		Kubeconfig: os.Getenv("CEXEC_TEST_KUBECONFIG"),
		Image:      os.Getenv("CEXEC_TEST_K8S_IMAGE"),
		Namespace:  os.Getenv("CEXEC_TEST_K8S_NAMESPACE"),
	}
	if c.Kubeconfig == "" || c.Image == "" {
		t.Skip("no cluster: set CEXEC_TEST_KUBECONFIG and CEXEC_TEST_K8S_IMAGE (and CEXEC_TEST_K8S_NAMESPACE) to run sandboxes in pods, as `make test-cluster` does")
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	return c
}
