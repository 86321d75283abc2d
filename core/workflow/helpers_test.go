package workflow

import (
	"os"
	"runtime"
	"testing"

	"github.com/cexec/cexec/core/workflow/jqworker"
)

// TestMain makes the test binary a jq worker when the engine starts it as
// one, as cmd/cexecd does.
func TestMain(m *testing.M) {
	if jqworker.Requested() {
		os.Exit(jqworker.Main())
	}
	os.Exit(m.Run())
}

// waitAMoment lets other goroutines run while a test polls for a state.
func waitAMoment() { runtime.Gosched() }
