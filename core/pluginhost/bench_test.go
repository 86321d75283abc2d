package pluginhost

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// BenchmarkStart measures Start (handshake, Info, decode, Configure) for
// one plugin and for four launched in parallel, the part of daemon start-up
// the plugin host owns; the target for the whole daemon is 300 ms with four.
func BenchmarkStart(b *testing.B) {
	blocks := []string{
		"plugin \"selector\" \"keyword\" {\n  command  = \"plugin-selector-keyword\"\n  max_hits = 5\n}\n",
		"plugin \"selector\" \"keyword2\" {\n  command  = \"plugin-selector-keyword\"\n  max_hits = 50\n}\n",
		"plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n}\n",
		"plugin \"selector\" \"env2\" {\n  command = \"envplugin\"\n}\n",
	}
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) {
			cfg, _ := loadConfig(b, pluginDir(b), strings.Join(blocks[:n], "\n")+"pipeline {\n  selector = \"keyword\"\n}\n")
			for b.Loop() {
				h := New(cfg, hclog.NewNullLogger())
				if diags := h.Start(context.Background()); diags.HasErrors() {
					b.Fatal(diags.Error())
				}
				b.StopTimer()
				h.Stop(context.Background())
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCall measures one Search through a supervised handle, the cost
// every selector call pays for supervision plus gRPC.
func BenchmarkCall(b *testing.B) {
	cfg, _ := loadConfig(b, pluginDir(b), "plugin \"selector\" \"env\" {\n  command = \"envplugin\"\n}\n")
	h := New(cfg, hclog.NewNullLogger())
	if diags := h.Start(context.Background()); diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	defer h.Stop(context.Background())
	sel, err := h.Selector("env")
	if err != nil {
		b.Fatal(err)
	}
	base, err := h.Plugin(pluginapi.KindSelector, "env")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("Info", func(b *testing.B) {
		for b.Loop() {
			if _, err := base.Info(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Search", func(b *testing.B) {
		for b.Loop() {
			if _, err := sel.Search(ctx, selector.SearchRequest{Query: "x"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
