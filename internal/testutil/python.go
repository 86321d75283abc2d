package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Python is the interpreter tests run Python with: Debian's, never a shim.
const Python = "/usr/bin/python3"

// NeedPython skips t (fails it under CI) when Python is not installed.
func NeedPython(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(Python); err != nil {
		SkipMissing(t, "no %s: %v", Python, err)
	}
}

// RunPython runs program with Python in isolated mode, unsandboxed, and
// returns its stdout; more than maxOutput bytes of it is an error. Tests use
// it in place of a sandbox where what they check is the program's output.
func RunPython(ctx context.Context, program string, maxOutput int64) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, Python, "-I", "-S", "-c", program)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("python: %w: %s", err, stderr.String())
	}
	if int64(stdout.Len()) > maxOutput {
		return nil, errors.New("python: output larger than the limit")
	}
	return stdout.Bytes(), nil
}
