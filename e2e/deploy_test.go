package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cexec/cexec/internal/testutil"
)

// manifest is the part of a Kubernetes object the checks read.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Spec struct {
				Volumes []struct {
					ConfigMap             *struct{ Name string } `yaml:"configMap"`
					PersistentVolumeClaim *struct {
						ClaimName string `yaml:"claimName"`
					} `yaml:"persistentVolumeClaim"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestDeployManifests checks what deploy/ ships: every Kubernetes
// document parses and names its kind; the Deployment runs two replicas
// and mounts objects the manifests define; cexecd validates the
// ConfigMap's cexec.hcl (with the repository's plugins); haproxy -c
// accepts both HAProxy configs.
func TestDeployManifests(t *testing.T) {
	files, err := filepath.Glob("../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	objects := map[string]manifest{} // kind/name
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var m manifest
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name: %+v", f, m)
			}
			objects[m.Kind+"/"+m.Metadata.Name] = m
		}
	}
	d, ok := objects["Deployment/cexecd"]
	if !ok || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Fatalf("Deployment cexecd with 2 replicas: %+v", d)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			if _, ok := objects["ConfigMap/"+v.ConfigMap.Name]; !ok {
				t.Errorf("the Deployment mounts ConfigMap %s, which no manifest defines", v.ConfigMap.Name)
			}
		}
		if v.PersistentVolumeClaim != nil {
			if _, ok := objects["PersistentVolumeClaim/"+v.PersistentVolumeClaim.ClaimName]; !ok {
				t.Errorf("the Deployment mounts PVC %s, which no manifest defines", v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	for _, want := range []string{"Service/cexecd", "Service/cexec-mcp", "Deployment/cexec-haproxy"} {
		if _, ok := objects[want]; !ok {
			t.Errorf("no %s", want)
		}
	}

	dir := t.TempDir()
	hcl := filepath.Join(dir, "cexec.hcl")
	if err := os.WriteFile(hcl, []byte(objects["ConfigMap/cexec-config"].Data["cexec.hcl"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bins.dir, "cexecd"), "validate", "-config", hcl, "-plugin-dir", bins.pluginDir,
		"-data-dir", filepath.Join(dir, "data"), "-socket", filepath.Join(dir, "cexecd.sock"))
	cmd.Env = append(os.Environ(), "CEXEC_PG_DSN=postgres://cexec@db/cexec", "CEXEC_VAULT_KEY=0123456789abcdef0123", "CEXEC_MCP_TOKEN=t0ken-of-the-test")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "configuration is valid") {
		t.Fatalf("cexecd validate of the ConfigMap's cexec.hcl: %v\n%s", err, out)
	}

	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		if haproxy, err = exec.LookPath("/usr/sbin/haproxy"); err != nil {
			testutil.SkipMissing(t, "haproxy is not installed (apt-get install haproxy; scripts/deps.sh does)")
		}
	}
	kcfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(kcfg, []byte(objects["ConfigMap/cexec-haproxy"].Data["haproxy.cfg"]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{
		exec.Command(haproxy, "-c", "-f", kcfg),
		exec.Command(haproxy, "-c", "-f", "../deploy/haproxy/haproxy.cfg"),
	} {
		c.Env = append(os.Environ(), "CEXEC_LB_BIND=127.0.0.1:8080", "CEXEC_REPLICA_A=127.0.0.1:7797", "CEXEC_REPLICA_B=127.0.0.1:7798")
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("%v: %v\n%s", c.Args, err, out)
		}
	}
}
