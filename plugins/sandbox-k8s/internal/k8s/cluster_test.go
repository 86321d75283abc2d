package k8s

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// The TestCluster tests run programs in real pods. They are opt-in (`make
// test-cluster`): CEXEC_TEST_KUBECONFIG names the kubeconfig of a cluster
// with a node and the agent-sandbox v0.5.6 controller and extensions,
// CEXEC_TEST_K8S_IMAGE an image with /usr/bin/python3 that the node has,
// CEXEC_TEST_K8S_NAMESPACE the namespace (default "default").
type clusterEnv struct {
	kubeconfig, image, namespace string
}

func clusterOrSkip(t *testing.T) clusterEnv {
	t.Helper()
	e := clusterEnv{
		kubeconfig: os.Getenv("CEXEC_TEST_KUBECONFIG"),
		image:      os.Getenv("CEXEC_TEST_K8S_IMAGE"),
		namespace:  os.Getenv("CEXEC_TEST_K8S_NAMESPACE"),
	}
	if e.kubeconfig == "" || e.image == "" {
		t.Skip("no cluster: set CEXEC_TEST_KUBECONFIG and CEXEC_TEST_K8S_IMAGE (and CEXEC_TEST_K8S_NAMESPACE) to run programs in pods, as `make test-cluster` does")
	}
	if e.namespace == "" {
		e.namespace = "default"
	}
	return e
}

// hcl is the plugin block of the cluster tests for owner, with extra
// attributes.
func (e clusterEnv) hcl(owner string, extra map[string]any) map[string]any {
	m := map[string]any{
		"kubeconfig": e.kubeconfig, "image": e.image, "namespace": e.namespace, "owner": owner,
		"warm_pool": 1, "ready_timeout": "3m",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// plugin is a configured plugin on the test cluster that is available,
// closed when t ends.
func (e clusterEnv) plugin(t *testing.T, owner string, extra map[string]any) *Plugin {
	t.Helper()
	p := New(nil)
	raw := mustJSON(e.hcl(owner, extra))
	if diags, err := p.Configure(t.Context(), raw, sandbox.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", err, diags)
	}
	t.Cleanup(func() { _ = p.Close() })
	caps, err := p.Capabilities(t.Context())
	if err != nil || !caps.Available {
		t.Fatalf("the test cluster is not usable: %+v %v", caps, err)
	}
	return p
}

// testOwner is an owner label of its own per test run, so that runs (and
// their sweeps) do not meet.
func testOwner(what string) string {
	return fmt.Sprintf("t-%s-%d", what, os.Getpid())
}

// TestClusterConformance runs the sandbox conformance suite with programs
// in pods, served over in-process gRPC as cexecd's plugin client sees it.
func TestClusterConformance(t *testing.T) {
	e := clusterOrSkip(t)
	plugintest.RunSandboxConformance(t, func(t *testing.T) sandbox.Sandbox {
		return e.plugin(t, testOwner("conf"), nil)
	})
}

// TestClusterLeftoversAfterRestart checks that a plugin that died with a
// live sandbox leaves nothing once a new process of its owner starts: no
// claim, pool or template, and the pods go with them.
func TestClusterLeftoversAfterRestart(t *testing.T) {
	e := clusterOrSkip(t)
	owner := testOwner("restart")
	first := New(nil)
	if diags, err := first.Configure(t.Context(), mustJSON(e.hcl(owner, nil)), sandbox.APIVersion); err != nil || diags.HasErrors() {
		t.Fatalf("configure: %v %v", err, diags)
	}
	if _, err := first.Create(t.Context(), sandbox.CreateRequest{ID: "left-1", Tenant: "acme"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	b, _ := first.boxes.Get("left-1")
	if pods := ownedPods(t, first.cl, e.namespace, owner); len(pods) == 0 {
		t.Fatalf("no pod carries the owner label %s while sandbox left-1 runs in %s", owner, b.pod)
	}
	// first is never closed: it stands for a plugin process that died.
	second := e.plugin(t, owner, nil)
	cl := second.cl
	for _, gvr := range []schema.GroupVersionResource{claimGVR, poolGVR, templateGVR} {
		list, err := cl.dynamic.Resource(gvr).Namespace(e.namespace).List(t.Context(), metav1.ListOptions{LabelSelector: ownerSelector(owner)})
		if err != nil || len(list.Items) != 0 {
			t.Errorf("%s of the dead plugin after the restart: %v, %v", gvr.Resource, len(list.Items), err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods := ownedPods(t, cl, e.namespace, owner)
		if len(pods) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v of the dead plugin are still there 2 minutes after the restart", pods)
		}
		time.Sleep(time.Second)
	}
}

// ownedPods names the pods that carry owner's labels, but those already
// being deleted.
func ownedPods(t *testing.T, cl *cluster, ns, owner string) []string {
	t.Helper()
	list, err := cl.core.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: ownerSelector(owner)})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name+"("+string(p.Status.Phase)+")")
	}
	return names
}

// runIn executes code in sandbox id and returns its stdout, failing t unless
// it ran cleanly.
func runIn(t *testing.T, p *Plugin, id, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h := &plugintest.Host{}
	res, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code}, h)
	if err != nil || res.ExitCode != 0 || res.Error != nil {
		t.Fatalf("exec in %s: %v, result %+v, error %+v, stderr %s", id, err, res, res.Error, h.Stderr())
	}
	return h.Stdout()
}

// TestClusterIsolation checks what a program in a pod must not be able to
// do: write the runtime under /cexec or the image's root, read a service
// account token, run as anyone but the tenant's uid, or see another
// tenant's sandbox; and that nothing of an execution outlives it.
func TestClusterIsolation(t *testing.T) {
	e := clusterOrSkip(t)
	p := e.plugin(t, testOwner("iso"), nil)
	for _, c := range []struct {
		id, tenant string
		uid        uint32
	}{{"iso-a", "acme", 2001}, {"iso-b", "globex", 2002}} {
		if _, err := p.Create(t.Context(), sandbox.CreateRequest{ID: c.id, Tenant: c.tenant, RunAs: &sandbox.HostUser{UID: c.uid, GID: c.uid}}); err != nil {
			t.Fatalf("create %s: %v", c.id, err)
		}
		t.Cleanup(func() { _ = p.Destroy(context.Background(), c.id) })
	}
	runIn(t, p, "iso-b", `open("/workspace/globex-secret", "w").write("globex")
open("/tmp/globex-tmp", "w").write("globex")
print("ok")`)
	out := runIn(t, p, "iso-a", `import os, glob
def tried(what, f):
    try:
        f()
        print(what, "WRITABLE")
    except OSError as e:
        print(what, "refused", e.errno)
tried("cexec-lib", lambda: open("/cexec/lib/cexec/__init__.py", "a").write("#"))
tried("cexec-new", lambda: open("/cexec/x", "w").write("x"))
tried("cexec-chmod", lambda: os.chmod("/cexec/lib", 0o777))
tried("root", lambda: open("/usr/lib/x", "w").write("x"))
tried("etc", lambda: open("/etc/passwd", "a").write("x"))
print("uid", os.getuid(), os.getgid(), os.geteuid())
print("token", os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"), os.path.exists("/run/secrets/kubernetes.io"))
found = []
for d in ("/workspace", "/tmp", "/dev/shm", "/cexec", "/var", "/run", "/home", "/mnt"):
    found += glob.glob(d + "/**/globex-*", recursive=True)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        found += [p for p in ("/proc/%s/root/workspace/globex-secret" % pid, "/proc/%s/root/tmp/globex-tmp" % pid) if os.path.exists(p)]
print("globex", found)
print("kube-env", [k for k in os.environ if k.startswith("KUBERNETES")])
`)
	// A process in a session of its own escapes the process-group kill;
	// the zygote's sweep of the container's pid namespace ends it.
	runIn(t, p, "iso-a", `import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # escaped"], start_new_session=True)
print("spawned")`)
	// Killed, it is an orphan of the container's pid 1, which must reap it.
	if left := runIn(t, p, "iso-a", `import os, time
def scan():
    left = []
    for pid in os.listdir("/proc"):
        try:
            stat = open("/proc/%s/stat" % pid, "rb").read()
            if pid.isdigit() and (b"escaped" in open("/proc/%s/cmdline" % pid, "rb").read() or stat[stat.rfind(b")") + 2:][:1] == b"Z"):
                left.append(pid)
        except OSError:
            pass
    return left
for _ in range(50):
    if not scan():
        break
    time.sleep(0.1)
print(scan())`); left != "[]\n" {
		t.Errorf("processes (or zombies) of an earlier execution in a session of their own: %s", left)
	}
	for _, want := range []string{
		"cexec-lib refused", "cexec-new refused", "cexec-chmod refused", "root refused", "etc refused",
		"uid 2001 2001 2001", "token False False", "globex []", "kube-env []",
	} {
		if !strings.Contains(out, want+" ") && !strings.Contains(out, want+"\n") {
			t.Errorf("the program printed:\n%s\nwant a line with %q", out, want)
		}
	}
}

// TestClusterNetworkIsolation checks that a sandbox without network cannot
// connect to another tenant's pod, which listens meanwhile. Only a CNI
// that enforces NetworkPolicy keeps pods apart (the template asks for a
// policy without rules), so the test runs where CEXEC_TEST_K8S_NETPOL=1
// says the cluster's CNI does.
func TestClusterNetworkIsolation(t *testing.T) {
	e := clusterOrSkip(t)
	if os.Getenv("CEXEC_TEST_K8S_NETPOL") != "1" {
		t.Skip("the test cluster's CNI is not said to enforce NetworkPolicy (CEXEC_TEST_K8S_NETPOL=1); without it pods reach each other whatever the template asks")
	}
	p := e.plugin(t, testOwner("net"), nil)
	for _, c := range []struct{ id, tenant string }{{"net-a", "acme"}, {"net-b", "globex"}} {
		if _, err := p.Create(t.Context(), sandbox.CreateRequest{ID: c.id, Tenant: c.tenant}); err != nil {
			t.Fatalf("create %s: %v", c.id, err)
		}
		t.Cleanup(func() { _ = p.Destroy(context.Background(), c.id) })
	}
	b, _ := p.boxes.Get("net-b")
	pod, err := p.cl.core.CoreV1().Pods(e.namespace).Get(t.Context(), b.pod, metav1.GetOptions{})
	if err != nil || pod.Status.PodIP == "" {
		t.Fatalf("pod of net-b: %v %v", pod, err)
	}
	listening := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h := &plugintest.Host{}
		_, _ = p.Exec(ctx, sandbox.ExecRequest{SandboxID: "net-b", Code: `import socket
s = socket.socket()
s.bind(("0.0.0.0", 8471))
s.listen()
print("listening", flush=True)
s.settimeout(15)
try:
    s.accept()
    print("accepted")
except OSError:
    print("nobody")
`}, h)
		listening <- h.Stdout()
	}()
	time.Sleep(3 * time.Second) // the listener is up well before
	out := runIn(t, p, "net-a", fmt.Sprintf(`import socket
try:
    socket.create_connection((%q, 8471), timeout=5).close()
    print("connected")
except OSError as e:
    print("refused", e)
`, pod.Status.PodIP))
	if strings.HasPrefix(out, "connected") {
		t.Errorf("a sandbox without network connected to another tenant's pod at %s", pod.Status.PodIP)
	}
	if b := <-listening; !strings.HasPrefix(b, "listening") {
		t.Errorf("the other tenant's program never listened: %q", b)
	}
}
