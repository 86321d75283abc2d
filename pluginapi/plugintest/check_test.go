package plugintest_test

import (
	"reflect"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

func TestInfoProblems(t *testing.T) {
	good := func() pluginapi.Info {
		return pluginapi.Info{
			Name: "kw", Kind: pluginapi.KindSelector, Version: "1.0.0", APIVersions: []string{"v1"},
			ConfigSchema: pluginapi.ConfigSchema{
				Attributes: []pluginapi.Attribute{{Name: "max_hits", Type: "number"}, {Name: "tags", Type: "map(list(string))"}, {Name: "x", Type: "any"}},
				Blocks: []pluginapi.NestedBlock{{TypeName: "rule", List: true, Body: pluginapi.ConfigSchema{
					// Reserved names are only reserved at the top level.
					Attributes: []pluginapi.Attribute{{Name: "command", Type: "string"}},
				}}},
			},
		}
	}
	tests := []struct {
		name   string
		change func(*pluginapi.Info)
		want   []string
	}{
		{"good", func(*pluginapi.Info) {}, nil},
		{"empty", func(i *pluginapi.Info) { *i = pluginapi.Info{} }, []string{
			"name is empty", "version is empty", `kind is "", want "selector"`, `api versions do not include "v1"`,
		}},
		{"wrong kind", func(i *pluginapi.Info) { i.Kind = pluginapi.KindGuard }, []string{`kind is "guard", want "selector"`}},
		{"bad type", func(i *pluginapi.Info) { i.ConfigSchema.Attributes[0].Type = "integer" }, []string{
			`attribute "max_hits": type "integer": type:1,1-8: Invalid type specification; The keyword "integer" is not a valid type specification.`,
		}},
		{"bad name", func(i *pluginapi.Info) { i.ConfigSchema.Attributes[0].Name = "max hits" }, []string{
			`attribute "max hits" is not a valid HCL identifier`,
		}},
		{"duplicate", func(i *pluginapi.Info) { i.ConfigSchema.Blocks[0].TypeName = "tags" }, []string{`block "tags" is declared twice`}},
		{"reserved", func(i *pluginapi.Info) { i.ConfigSchema.Attributes[1].Name = "timeout" }, []string{
			`attribute "timeout" clashes with cexec's own plugin attribute`,
		}},
		{"nested bad type", func(i *pluginapi.Info) { i.ConfigSchema.Blocks[0].Body.Attributes[0].Type = "" }, []string{
			`attribute "rule.command": type "": type:1,1-1: Missing expression; Expected the start of an expression, but found the end of the file.`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := good()
			tt.change(&info)
			if got := plugintest.InfoProblems(info, pluginapi.KindSelector); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("InfoProblems =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
