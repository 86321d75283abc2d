package state

import (
	"errors"
	"testing"

	"github.com/cexec/cexec/cmd/cexecctl/cli"
)

func TestPlanPut(t *testing.T) {
	tests := []struct {
		name, file string
		want       putPlan
		usage      bool
	}{
		{name: "p.json", file: "", want: putPlan{name: "p.json"}},
		{name: "p.json", file: "-", want: putPlan{name: "p.json"}},
		{name: "p.json", file: "in.json", want: putPlan{name: "p.json"}},
		{name: "p.yaml", file: "in.yml", want: putPlan{name: "p.yaml"}},
		{name: "p.yml", file: "-", want: putPlan{name: "p.yml"}},
		{name: "p.yaml", file: "in.json", want: putPlan{name: "p.yaml", fromJSON: true}},
		{name: "p", file: "in.yml", want: putPlan{name: "p.yml"}},
		{name: "p", file: "in.JSON", want: putPlan{name: "p.json"}},
		{name: "p", file: "", want: putPlan{name: "p.json"}},
		{name: "p", file: "data.txt", want: putPlan{name: "p.json"}},
		{name: "p.json", file: "data.txt", want: putPlan{name: "p.json"}},
		{name: "p.json", file: "in.yaml", usage: true},
		{name: "x.txt", file: "", usage: true},
		{name: "x.txt", file: "in.json", usage: true},
		{name: "notes.md", file: "in.yaml", usage: true},
	}
	for _, tt := range tests {
		got, err := planPut(tt.name, tt.file)
		var ee *cli.ExitError
		if tt.usage {
			if !errors.As(err, &ee) || ee.Code != cli.ExitUsage {
				t.Errorf("planPut(%q, %q) = %+v, %v; want a usage error", tt.name, tt.file, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("planPut(%q, %q) = %+v, %v; want %+v", tt.name, tt.file, got, err, tt.want)
		}
	}
}

func TestSavedAs(t *testing.T) {
	tests := []struct{ given, stored, want string }{
		{"p.json", "p.json", "p.json"},
		{"p", "p.json", "p as p.json"},
		{"p", "p.yml", "p as p.yml"},
	}
	for _, tt := range tests {
		if got := savedAs(tt.given, tt.stored); got != tt.want {
			t.Errorf("savedAs(%q, %q) = %q, want %q", tt.given, tt.stored, got, tt.want)
		}
	}
}
