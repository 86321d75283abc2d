package k8s

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

func testSettings(t *testing.T, hcl string) *settings {
	t.Helper()
	s, diags := decodeConfig([]byte(hcl))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return s
}

// TestCheckRequest checks how a request becomes a pod: the defaults fill
// unset limits, the tenant names its claim or subPath, and what a pod
// cannot do is refused with the reason.
func TestCheckRequest(t *testing.T) {
	perTenant := testSettings(t, `{"image":"python:3","workspace_volume":"pvc_per_tenant","workspace_claim":"ws-","memory_mb":300}`)
	p, ups, err := perTenant.checkRequest(sandbox.CreateRequest{ID: "a", Tenant: "acme",
		Mounts: []sandbox.Mount{{Source: "/srv/ws", Target: "/workspace"}, {Source: "/srv/skills", Target: "/cexec/skills", ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.claim != "ws-acme" || p.subPath != "" || p.limits.MemoryBytes != 300<<20 || p.limits.Timeout != defaultTimeout || p.runAs != defaultRunAs {
		t.Errorf("pod spec = %+v", p)
	}
	if len(ups) != 1 || ups[0] != (upload{source: "/srv/skills", target: "cexec/skills"}) {
		t.Errorf("uploads = %+v", ups)
	}
	for _, tc := range []struct {
		name string
		req  sandbox.CreateRequest
		want string
	}{
		{"no id", sandbox.CreateRequest{Tenant: "t"}, "id is empty"},
		{"root", sandbox.CreateRequest{ID: "a", Tenant: "t", RunAs: &sandbox.HostUser{UID: 0, GID: 5}}, "never run as root"},
		{"writable bind", sandbox.CreateRequest{ID: "a", Tenant: "t", Mounts: []sandbox.Mount{{Source: "/x", Target: "/cexec/x"}}}, "cannot bind host paths"},
		{"writable /src", sandbox.CreateRequest{ID: "a", Tenant: "t", Mounts: []sandbox.Mount{{Source: "/x", Target: "/src/x"}}}, "cannot bind host paths"},
		{"over the runtime", sandbox.CreateRequest{ID: "a", Tenant: "t", Mounts: []sandbox.Mount{{Source: "/x", Target: "/cexec/lib/x", ReadOnly: true}}}, "cannot bind host paths"},
		{"tenant no claim", sandbox.CreateRequest{ID: "a", Tenant: "a_b"}, "not a PersistentVolumeClaim name"},
		{"upper-case tenant", sandbox.CreateRequest{ID: "a", Tenant: "Acme"}, "not a PersistentVolumeClaim name"},
		{"tenant escapes", sandbox.CreateRequest{ID: "a", Tenant: "../b"}, "cannot name a workspace volume"},
		{"bad env", sandbox.CreateRequest{ID: "a", Tenant: "t", Env: map[string]string{"A=B": "c"}}, "not valid"},
		{"bad id", sandbox.CreateRequest{ID: "../x", Tenant: "t"}, "sandbox id"},
		{"relative source", sandbox.CreateRequest{ID: "a", Tenant: "t", Mounts: []sandbox.Mount{{Source: "ws", Target: "/workspace"}}}, "not an absolute path"},
		{"network", sandbox.CreateRequest{ID: "a", Tenant: "t", Network: true}, "allow_network is false"},
	} {
		if _, _, err := perTenant.checkRequest(tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestUploadUnpacks packs the runtime and a tree as Create does and
// unpacks it with the pod-side program under the real Python, then checks
// that the zygote's command line finds the runtime where it was put.
func TestUploadUnpacks(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "fs", "__pycache__"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"fs/read.py": "X = 1\n", "fs/__pycache__/read.pyc": "junk"} {
		if err := os.WriteFile(filepath.Join(tree, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tarball, err := packUploads([]upload{{source: tree, target: "cexec/servers"}, {source: tree, target: "src/servers"}})
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	cmd := exec.Command(python, "-I", "-S", "-c", unpackSrc, dest)
	cmd.Stdin = bytes.NewReader(tarball)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("unpack: %v: %s", err, out)
	}
	for _, dir := range []string{"cexec", "src"} {
		if data, err := os.ReadFile(filepath.Join(dest, dir, "servers", "fs", "read.py")); err != nil || string(data) != "X = 1\n" {
			t.Errorf("%s/servers/fs/read.py = %q, %v", dir, data, err)
		}
		if _, err := os.Stat(filepath.Join(dest, dir, "servers", "fs", "__pycache__")); !os.IsNotExist(err) {
			t.Errorf("__pycache__ was copied: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dest, "cexec", "lib", "cexec", "_zygote.py")); err != nil {
		t.Errorf("the runtime is not at cexec/lib/: %v", err)
	}
	cmdline := strings.Join(zygoteCommand("/usr/bin/python3", sandbox.Limits{Pids: 64}, map[string]string{"A": "1", "PYTHONPATH": "/evil"}), " ")
	for _, want := range []string{"/usr/bin/env -i A=1 ", "PYTHONPATH=/cexec/lib ", " /cexec/lib ", "--rlimit nproc=64", "--ctl-in 0 --ctl-out 1"} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("zygote command %q lacks %q", cmdline, want)
		}
	}
	if strings.Contains(cmdline, "/evil") {
		t.Errorf("the request's PYTHONPATH overrode the runtime's: %q", cmdline)
	}
	if strings.Contains(cmdline, "--memory-events") {
		t.Errorf("a sandbox without a memory limit reads a count of kills at it: %q", cmdline)
	}
	cmdline = strings.Join(zygoteCommand("/usr/bin/python3", sandbox.Limits{MemoryBytes: 256 << 20}, nil), " ")
	if want := "--memory-events /sys/fs/cgroup/memory.events:/sys/fs/cgroup/memory/memory.oom_control --memory-limit 268435456"; !strings.Contains(cmdline, want) {
		t.Errorf("zygote command %q lacks %q", cmdline, want)
	}
}

// TestPodCexecReadOnly checks the pod a template asks for: /cexec is
// writable by the loader container only.
func TestPodCexecReadOnly(t *testing.T) {
	s := testSettings(t, `{"image":"python:3"}`)
	p, _, err := s.checkRequest(sandbox.CreateRequest{ID: "a", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	checkCexecMounts(t, p.pod()["containers"].([]any))
}
