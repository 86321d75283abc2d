package msb

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// The benchmarks time one execution with a tool call through the plugin
// over in-process gRPC, as cexecd sees it. Without a VM they measure the
// plugin's transport: msb exec --stream's pipes in CLI mode, the
// command-per-frame relay and the REPL in server mode.

func benchExec(b *testing.B, sb sandbox.Sandbox, id string) {
	b.Helper()
	code := "from cexec import call_tool\nprint(call_tool('filesystem', 'read_text_file', {'path': '/a'}))"
	h := toolHost()
	ctx := context.Background()
	var total time.Duration
	n := 0
	for b.Loop() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code}, h)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
		total += res.Duration
		n++
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n)/1000, "ms/exec")
}

func benchSandbox(b *testing.B, config map[string]any) (sandbox.Sandbox, string) {
	b.Helper()
	impl := New(nil)
	b.Cleanup(func() { _ = impl.Close() })
	sb := plugintest.Sandbox(b, impl)
	raw, err := json.Marshal(config)
	if err != nil {
		b.Fatal(err)
	}
	if diags, err := sb.Configure(context.Background(), raw, sandbox.APIVersion); err != nil || diags.HasErrors() {
		b.Fatalf("configure: %v %v", diags, err)
	}
	if _, err := sb.Create(context.Background(), sandbox.CreateRequest{ID: "bench", Mounts: []sandbox.Mount{{Source: b.TempDir(), Target: "/workspace"}}}); err != nil {
		b.Fatalf("create: %v", err)
	}
	return sb, "bench"
}

func BenchmarkFakeMSB_Exec(b *testing.B) {
	home := fakeHost(b)
	sb, id := benchSandbox(b, map[string]any{"msb": fakeMSB, "msb_home": home, "python": python})
	benchExec(b, sb, id)
}

func BenchmarkLegacyServer_RelayExec(b *testing.B) {
	ls := newLegacyServer(b)
	sb, id := benchSandbox(b, ls.configMap(b, nil))
	benchExec(b, sb, id)
}

func BenchmarkLegacyServer_REPLExec(b *testing.B) {
	ls := newLegacyServer(b)
	sb, id := benchSandbox(b, ls.configMap(b, map[string]any{"server_exec": "repl"}))
	code := "print(sum(range(1000)))"
	ctx := context.Background()
	for b.Loop() {
		if res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: code}, &plugintest.Host{}); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
	}
}
