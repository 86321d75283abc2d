package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
)

// TestApprovalOutlastingTheExecutionWarns: an approval timeout set longer
// than sandbox.limits.timeout is a warning at its line; one within it, and
// the default (meant for call_tool, which has no sandbox), are not.
func TestApprovalOutlastingTheExecutionWarns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cexec.hcl")
	src := `cexec {
  data_dir = "` + dir + `"
}

sandbox {
  limits {
    timeout = "30s"
  }
}

tenant "acme" {
  policy {
    approval {
      tools   = ["fs/*"]
      timeout = "10s"
    }
    approval {
      annotations = ["destructiveHint"]
      timeout     = "5m"
    }
    approval {
      tools = ["mail/*"]
    }
  }
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Overrides{LookupEnv: func(string) (string, bool) { return "", false }})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	diags = policyDiags(cfg)
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Subject.Start.Line != 19 ||
		!strings.Contains(diags[0].Detail, "5m0s") || !strings.Contains(diags[0].Detail, "30s") {
		t.Errorf("diagnostics: %v", diags)
	}
}
