package policy_test

import (
	"testing"
	"time"

	"github.com/cexec/cexec/core/guard/policy"
)

func TestApprovalDecode(t *testing.T) {
	cfg, _ := load(t, "approval.hcl")
	ps, diags := policy.DecodeTenants(cfg)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	p := ps["acme"]
	if len(p.Approvals) != 2 {
		t.Fatalf("approvals = %+v", p.Approvals)
	}
	if a := p.Approvals[0]; a.Timeout != 90*time.Second || a.Range.Start.Line != 3 {
		t.Errorf("first approval %+v, want timeout 90s at line 3", a)
	}
	if a := p.Approvals[1]; a.Timeout != policy.DefaultApprovalTimeout {
		t.Errorf("second approval's timeout %s, want the default", a.Timeout)
	}

	yes, no := true, false
	for _, tc := range []struct {
		name         string
		server, tool string
		hints        policy.ToolHints
		want         int // index of the rule, -1 for none
	}{
		{"marked destructive", "fs", "rm", policy.ToolHints{Destructive: &yes}, 0},
		{"marked not destructive", "fs", "touch", policy.ToolHints{Destructive: &no}, -1},
		{"read-only", "fs", "read", policy.ToolHints{ReadOnly: &yes}, -1},
		{"read-only wins over destructive", "fs", "read", policy.ToolHints{ReadOnly: &yes, Destructive: &yes}, -1},
		{"no annotations: the specification's default is destructive", "fs", "mystery", policy.ToolHints{}, 0},
		{"by pattern", "payments", "refund", policy.ToolHints{ReadOnly: &yes}, 1},
		{"by exact name", "mail", "send", policy.ToolHints{ReadOnly: &yes}, 1},
		{"other tool", "mail", "list", policy.ToolHints{ReadOnly: &yes}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Approval(tc.server, tc.tool, tc.hints)
			switch {
			case tc.want < 0 && got != nil:
				t.Errorf("rule %+v applies, want none", got)
			case tc.want >= 0 && got != p.Approvals[tc.want]:
				t.Errorf("rule %+v, want rule %d", got, tc.want)
			}
		})
	}
	if why := p.Approvals[1].Why("payments", "refund", policy.ToolHints{}); why != `the tenant's policy asks for approval of tools matching "payments/*"` {
		t.Errorf("Why = %q", why)
	}
	if (*policy.Policy)(nil).Approval("a", "b", policy.ToolHints{}) != nil {
		t.Error("a nil policy asks for approval")
	}
}

func TestApprovalDecodeErrors(t *testing.T) {
	_, diags := policy.Decode(parseBody(t, readFile(t, "testdata/approval_errors.hcl")))
	checkDiags(t, diags, []struct {
		line    int
		summary string
	}{
		{4, "Invalid tool pattern"},
		{5, "Invalid annotation"},
		{6, "Invalid timeout"},
		{8, "Approval matches nothing"},
		{9, "Invalid timeout"},
	})
}
