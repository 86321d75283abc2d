package pluginapi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNegotiateAPIVersion(t *testing.T) {
	for _, tc := range []struct {
		name         string
		host, plugin []string
		want         string
		ok           bool
	}{
		{"same", []string{"v1"}, []string{"v1"}, "v1", true},
		{"highest shared", []string{"v1", "v2", "v3"}, []string{"v2", "v1", "v4"}, "v2", true},
		{"none shared", []string{"v1"}, []string{"v2"}, "", false},
		{"malformed ignored", []string{"1", "v1"}, []string{"1", "v1"}, "v1", true},
		{"plugin lists nothing", []string{"v1"}, nil, "", false},
		{"numeric not lexical", []string{"v1", "v10"}, []string{"v10", "v9", "v1"}, "v10", true},
		{"only malformed", []string{"v1"}, []string{"1", "vx"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NegotiateAPIVersion(tc.host, tc.plugin)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("NegotiateAPIVersion(%v, %v) = %q, %v; want %q, %v", tc.host, tc.plugin, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestCheckAPIVersion(t *testing.T) {
	for _, tc := range []struct {
		chosen  string
		wantErr bool
	}{{"v1", false}, {"", true}, {"v2", true}} {
		diags := CheckAPIVersion(KindGuard, []string{"v1"}, tc.chosen)
		if diags.HasErrors() != tc.wantErr {
			t.Fatalf("chosen %q: %v", tc.chosen, diags)
		}
		if tc.wantErr && !strings.Contains(diags[0].Summary, "guard API version") {
			t.Fatalf("chosen %q: summary %q does not name the kind", tc.chosen, diags[0].Summary)
		}
	}
}

func TestDecodeConfig(t *testing.T) {
	type cfg struct {
		Size  int    `json:"size"`
		Label string `json:"label"`
	}
	for _, tc := range []struct {
		name     string
		raw      string
		want     cfg
		wantAttr string // "" and no error wanted when wantErr is false
		wantErr  bool
	}{
		{"empty keeps defaults", "", cfg{Size: 7}, "", false},
		{"null keeps defaults", " null ", cfg{Size: 7}, "", false},
		{"decodes", `{"size": 3, "label": "x"}`, cfg{Size: 3, Label: "x"}, "", false},
		{"unknown attribute", `{"sise": 3}`, cfg{}, "sise", true},
		{"wrong type", `{"size": "big"}`, cfg{}, "size", true},
		{"not an object", `[1]`, cfg{}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg{Size: 7}
			diags := DecodeConfig("the test plugin", json.RawMessage(tc.raw), &c)
			if diags.HasErrors() != tc.wantErr {
				t.Fatalf("diags = %v", diags)
			}
			if tc.wantErr {
				if diags[0].Attribute != tc.wantAttr {
					t.Fatalf("attribute %q, want %q (%v)", diags[0].Attribute, tc.wantAttr, diags)
				}
				return
			}
			if c != tc.want {
				t.Fatalf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}
