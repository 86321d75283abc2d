package k8s

import (
	"fmt"
	"sync"

	"github.com/go-logr/logr/funcr"
	"github.com/hashicorp/go-hclog"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// cluster is the plugin's connection to the API server.
type cluster struct {
	config  *rest.Config
	dynamic dynamic.Interface
	core    kubernetes.Interface
}

// restConfig loads the credentials the settings name: the pod's service
// account, or a kubeconfig file (the client's usual search when none is set).
func restConfig(s *settings) (*rest.Config, error) {
	if s.inCluster {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster credentials: %w", err)
		}
		return c, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if s.kubeconfig != "" {
		rules.ExplicitPath = s.kubeconfig
	}
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return c, nil
}

func newCluster(c *rest.Config) (*cluster, error) {
	c = rest.CopyConfig(c)
	c.UserAgent = "cexec-sandbox-k8s"
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &cluster{config: c, dynamic: dyn, core: core}, nil
}

var klogOnce sync.Once

// routeClientLogs sends client-go's own log lines (klog) to log at debug
// level instead of the plugin's stderr: client-go reports the end of every
// exec stream the plugin closes as an "Unhandled Error".
func routeClientLogs(log hclog.Logger) {
	klogOnce.Do(func() {
		l := log.Named("client-go")
		klog.SetLogger(funcr.New(func(prefix, args string) { l.Debug(prefix + " " + args) }, funcr.Options{}))
	})
}
