package pluginapi_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// serveChildEnv makes the test binary act as a plugin started by hand.
const serveChildEnv = "CEXEC_TEST_SERVE_CHILD"

func TestServeRefusesToRunByHand(t *testing.T) {
	if os.Getenv(serveChildEnv) == "1" {
		pluginapi.Serve(pluginapi.KindSelector, &selector.GRPCPlugin{})
		t.Fatal("Serve returned instead of exiting")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeRefusesToRunByHand$")
	cmd.Env = append(os.Environ(), serveChildEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("plugin started by hand: err = %v, want exit status 1; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "not meant to be executed directly") {
		t.Errorf("stderr does not explain the refusal:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String(), "|grpc") {
		t.Errorf("plugin printed a handshake line when started by hand: %q", stdout.String())
	}
}
