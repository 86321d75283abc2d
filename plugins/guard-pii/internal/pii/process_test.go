package pii

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	proc := plugintest.Launch(t, testutil.BuildBinary(t, "./plugins/guard-pii"), pluginapi.KindGuard, &guard.GRPCPlugin{})
	g := proc.Plugin.(guard.Guard)
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
		t.Fatalf("Detect 1 MiB: %v\nlogs:\n%s", err, proc.Logs())
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

	proc.Client.Kill()
	out := proc.Logs()
	if !strings.Contains(out, "configured") {
		t.Errorf("the plugin's log lines did not reach the host:\n%s", out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("a configured secret reached the logs:\n%s", out)
	}
}
