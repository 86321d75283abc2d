package pii

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/internal/testutil/piitest"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

// TestPluginProcess builds the binary and runs it the way cexecd does
// (go-plugin, gRPC only, AutoMTLS, an empty environment), configures it with
// a secret header and sends it 1 MiB of text: the spans come back across the
// process boundary, and the secret never shows in the plugin's logs.
func TestPluginProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := testutil.BuildBinary(t, "./plugins/guard-pii")
	// go-plugin writes the host's log output from its own goroutines.
	logs := &testutil.Buffer{}
	cmd := exec.Command(bin)
	cmd.Env = []string{pluginapi.LogLevelEnv + "=debug"}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginapi.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{pluginapi.ProtocolVersion: {string(pluginapi.KindGuard): &guard.GRPCPlugin{}}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin: %v\nlogs:\n%s", err, logs)
	}
	raw, err := rpc.Dispense(string(pluginapi.KindGuard))
	if err != nil {
		t.Fatal(err)
	}
	g := raw.(guard.Guard)
	plugintest.CheckInfo(t, g, pluginapi.KindGuard)

	const secret = "Bearer s3cr3t-t0ken-value"
	cfg, _ := json.Marshal(map[string]any{
		"phone_region": "US",
		"ner_headers":  map[string]string{"Authorization": secret},
		"code_checks":  []string{"all"},
	})
	diags, err := g.Configure(t.Context(), cfg, guard.APIVersion)
	if err != nil || diags.HasErrors() {
		t.Fatalf("Configure: %v %v", diags, err)
	}

	text, planted := piitest.MixedLabelled(1<<20, 2)
	start := time.Now()
	spans, err := g.Detect(t.Context(), guard.DetectRequest{Text: text})
	if err != nil {
		t.Fatalf("Detect 1 MiB: %v\nlogs:\n%s", err, logs)
	}
	cold := time.Since(start)
	start = time.Now()
	if _, err := g.Detect(t.Context(), guard.DetectRequest{Text: text}); err != nil {
		t.Fatal(err)
	}
	t.Logf("Detect over gRPC: %d bytes, %d spans, first call %v, second %v (measured on a shared machine, not asserted)", len(text), len(spans), cold, time.Since(start))
	got := map[[2]int]string{}
	for _, s := range spans {
		got[[2]int{s.Start, s.End}] = s.Type
	}
	want, hit := 0, 0
	for _, p := range planted {
		if p.Type == "PERSON" {
			continue
		}
		want++
		if got[[2]int{p.Start, p.End}] == p.Type {
			hit++
		}
	}
	if float64(hit) < 0.99*float64(want) || float64(len(spans)) > 1.01*float64(want) {
		t.Errorf("%d of %d planted values found over gRPC, %d spans in all", hit, want, len(spans))
	}

	d, err := g.CheckCode(t.Context(), guard.CheckCodeRequest{Code: "open('/proc/1/environ').read()"})
	if err != nil || d.Allow || len(d.Diagnostics) != 1 {
		t.Errorf("CheckCode: %+v %v", d, err)
	}

	client.Kill()
	out := logs.String()
	if !strings.Contains(out, "configured") {
		t.Errorf("the plugin's log lines did not reach the host:\n%s", out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("a configured secret reached the logs:\n%s", out)
	}
}
