package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cexec/cexec/api/endpoint"
)

func TestTable(t *testing.T) {
	var b strings.Builder
	tb := NewTable(&b, "NAME", "N")
	tb.Row("a", 1)
	tb.Row("longer", Dash(""))
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "NAME    N\na       1\nlonger  -\n"; b.String() != want {
		t.Errorf("table\n%q\nwant\n%q", b.String(), want)
	}
}

func TestFirstLine(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"  short\nsecond", 10, "short"},
		{"exactly ten", 11, "exactly ten"},
		{"much too long", 5, "much…"},
	}
	for _, tt := range tests {
		if got := FirstLine(tt.in, tt.n); got != tt.want {
			t.Errorf("FirstLine(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestTenantFlag(t *testing.T) {
	for _, tt := range []struct {
		env, args, want string
		chosen          bool
	}{
		{"", "", endpoint.DefaultTenant, false},
		{"acme", "", "acme", true},
		{"acme", "--tenant=beta", "beta", true},
	} {
		t.Setenv(endpoint.TenantEnv, tt.env)
		var tenant string
		var chosen bool
		cmd := &cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error {
			chosen = TenantChosen(cmd)
			return nil
		}}
		TenantFlag(cmd.Flags(), &tenant)
		cmd.SetArgs(strings.Fields(tt.args))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		if tenant != tt.want || chosen != tt.chosen {
			t.Errorf("env %q args %q: tenant %q chosen %v, want %q %v", tt.env, tt.args, tenant, chosen, tt.want, tt.chosen)
		}
	}
}
