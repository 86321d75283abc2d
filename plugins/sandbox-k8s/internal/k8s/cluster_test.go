package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// The TestCluster tests run programs in real pods. They are opt-in (`make
// test-cluster`): testutil.K8sClusterOrSkip says what they need.
type clusterEnv struct{ testutil.K8sCluster }

func clusterOrSkip(t *testing.T) clusterEnv {
	t.Helper()
	return clusterEnv{testutil.K8sClusterOrSkip(t)}
}

// hcl is the plugin block of the cluster tests for owner, with extra
// attributes.
func (e clusterEnv) hcl(owner string, extra map[string]any) map[string]any {
	m := map[string]any{
		"kubeconfig": e.Kubeconfig, "image": e.Image, "namespace": e.Namespace, "owner": owner,
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
	if pods := ownedPods(t, first.cl, e.Namespace, owner); len(pods) == 0 {
		t.Fatalf("no pod carries the owner label %s while sandbox left-1 runs in %s", owner, b.pod)
	}
	// first is never closed: it stands for a plugin process that died.
	second := e.plugin(t, owner, nil)
	cl := second.cl
	for _, gvr := range []schema.GroupVersionResource{claimGVR, poolGVR, templateGVR} {
		list, err := cl.dynamic.Resource(gvr).Namespace(e.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: ownerSelector(owner)})
		if err != nil || len(list.Items) != 0 {
			t.Errorf("%s of the dead plugin after the restart: %v, %v", gvr.Resource, len(list.Items), err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods := ownedPods(t, cl, e.Namespace, owner)
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
// connect to another tenant's listening pod, while a sandbox with network
// can (so the test can fail). In link_down mode it runs on any cluster: the
// pod's interfaces but lo are down, a program cannot bring them up again,
// and its program and call_tool still run (pods/exec does not use the
// pod's network). The policy mode relies on a CNI that enforces
// NetworkPolicy, so it runs where CEXEC_TEST_K8S_NETPOL=1 says the
// cluster's does; the test cluster's bridge does not.
func TestClusterNetworkIsolation(t *testing.T) {
	e := clusterOrSkip(t)
	t.Run(isolationLinkDown, func(t *testing.T) { netIsolation(t, e, isolationLinkDown, "netld") })
	t.Run(isolationPolicy, func(t *testing.T) {
		if os.Getenv("CEXEC_TEST_K8S_NETPOL") != "1" {
			t.Skip("the test cluster's CNI is not said to enforce NetworkPolicy (CEXEC_TEST_K8S_NETPOL=1); without it pods reach each other in policy mode")
		}
		netIsolation(t, e, isolationPolicy, "netpol")
	})
}

// netProbe is what the sandbox without network runs: the interfaces up
// besides lo, an attempt to bring its interfaces up, a connection to the
// other tenant's listener and a tool call.
const netProbe = `import cexec, errno, fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def flags(name):
    return struct.unpack_from("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", name.encode(), 0)))[1]
names = [n for _, n in socket.if_nameindex() if n != "lo"]
print("up", [n for n in names if flags(n) & 1])
print("routes", len(open("/proc/net/route").read().splitlines()) - 1)
for n in names:
    try:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", n.encode(), flags(n) | 1))
        print("raise-link", n, "DONE")
    except OSError as e:
        print("raise-link", n, "refused", errno.errorcode[e.errno])
try:
    c = socket.create_connection((%q, 8471), timeout=5)
    c.sendall(b"a")
    c.close()
    print("connect CONNECTED")
except OSError as e:
    print("connect refused", e)
print("tool", cexec.call_tool("files", "read", {"path": "a.txt"})["text"])
`

// netIsolation runs the network isolation check with network_isolation
// mode, under its own owner label.
func netIsolation(t *testing.T, e clusterEnv, mode, owner string) {
	p := e.plugin(t, testOwner(owner), map[string]any{"allow_network": true, "network_isolation": mode})
	for _, c := range []struct {
		id, tenant string
		network    bool
	}{{"net-a", "acme", false}, {"net-b", "globex", true}, {"net-c", "initech", true}} {
		if _, err := p.Create(t.Context(), sandbox.CreateRequest{ID: c.id, Tenant: c.tenant, Network: c.network}); err != nil {
			t.Fatalf("create %s: %v", c.id, err)
		}
		t.Cleanup(func() { _ = p.Destroy(context.Background(), c.id) })
	}
	b, _ := p.boxes.Get("net-b")
	pod, err := p.cl.core.CoreV1().Pods(e.Namespace).Get(t.Context(), b.pod, metav1.GetOptions{})
	if err != nil || pod.Status.PodIP == "" {
		t.Fatalf("pod of net-b: %v %v", pod, err)
	}
	ip := pod.Status.PodIP
	// The other tenant's listener prints what each connection sends until
	// one sends "stop".
	listener := &plugintest.Host{}
	listened := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "net-b", Code: `import socket
s = socket.socket()
s.bind(("0.0.0.0", 8471))
s.listen()
s.settimeout(90)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    got = c.recv(16)
    print("got", got.decode(), flush=True)
    if got == b"stop":
        break
`}, listener)
		listened <- err
	}()
	for !strings.Contains(listener.Stdout(), "listening") {
		select {
		case err := <-listened:
			t.Fatalf("the listener ended before listening: %v %s %s", err, listener.Stdout(), listener.Stderr())
		case <-time.After(50 * time.Millisecond):
		}
	}
	send := func(what string) string {
		return runIn(t, p, "net-c", fmt.Sprintf(`import socket
c = socket.create_connection((%q, 8471), timeout=10)
c.sendall(%q.encode())
c.close()
print("sent")`, ip, what))
	}
	send("c")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h := &plugintest.Host{OnCall: func(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"text":"via exec"}`), nil
	}}
	res, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "net-a", Code: fmt.Sprintf(netProbe, ip)}, h)
	if err != nil || res.ExitCode != 0 || res.Error != nil {
		t.Fatalf("the probe in net-a: %v, result %+v, error %+v, stderr %s", err, res, res.Error, h.Stderr())
	}
	out := h.Stdout()
	send("stop")
	if err := <-listened; err != nil {
		t.Fatalf("the listener: %v", err)
	}
	t.Logf("net-a (%s) printed:\n%s", mode, out)
	if got := listener.Stdout(); !strings.Contains(got, "got c\n") || strings.Contains(got, "got a\n") {
		t.Errorf("the other tenant's listener printed %q; want the networked sandbox's \"c\" and not the cut one's \"a\"", got)
	}
	want := []string{"connect refused", "tool via exec"}
	if mode == isolationLinkDown {
		want = append(want, "up []", "routes 0")
		if !strings.Contains(out, "raise-link eth0 refused EPERM") {
			t.Errorf("net-a printed:\n%s\nwant its attempt to bring eth0 up refused with EPERM", out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("net-a printed:\n%s\nwant a line with %q", out, w)
		}
	}
	if strings.Contains(out, "DONE") {
		t.Errorf("a program brought a link up:\n%s", out)
	}
}

// TestClusterPodSecurityRestricted checks the documented choice of modes in
// a namespace of its own that enforces Pod Security "restricted": a
// sandbox in policy mode runs there, and in link_down mode (NET_ADMIN in
// the init container) Create fails with an error that says why.
func TestClusterPodSecurityRestricted(t *testing.T) {
	e := clusterOrSkip(t)
	probe := e.plugin(t, testOwner("psa-probe"), nil)
	nss := probe.cl.core.CoreV1().Namespaces()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("cx-psa-%d", os.Getpid()),
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	if _, err := nss.Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { _ = nss.Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	// Pods need the namespace's default ServiceAccount, which the
	// controller manager makes.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := probe.cl.core.CoreV1().ServiceAccounts(ns.Name).Get(t.Context(), "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no default ServiceAccount in %s: %v", ns.Name, err)
		}
	}
	e.Namespace = ns.Name

	policy := e.plugin(t, testOwner("psa-policy"), map[string]any{"network_isolation": isolationPolicy})
	if _, err := policy.Create(t.Context(), sandbox.CreateRequest{ID: "psa-policy", Tenant: "acme"}); err != nil {
		t.Fatalf("create in policy mode under restricted: %v", err)
	}
	t.Cleanup(func() { _ = policy.Destroy(context.Background(), "psa-policy") })
	if out := runIn(t, policy, "psa-policy", `print("ran")`); out != "ran\n" {
		t.Errorf("policy mode under restricted printed %q", out)
	}

	linkDown := e.plugin(t, testOwner("psa-linkdown"), map[string]any{"ready_timeout": "30s"})
	_, err := linkDown.Create(t.Context(), sandbox.CreateRequest{ID: "psa-linkdown", Tenant: "acme"})
	if err == nil {
		_ = linkDown.Destroy(context.Background(), "psa-linkdown")
		t.Fatal("a link_down sandbox started in a namespace that enforces Pod Security restricted")
	}
	t.Logf("link_down under restricted: %v", err)
	if !strings.Contains(err.Error(), "Pod Security admission") || !strings.Contains(err.Error(), `network_isolation "policy"`) {
		t.Errorf("link_down under restricted: %v; want the error to name Pod Security admission and the policy mode", err)
	}
}
