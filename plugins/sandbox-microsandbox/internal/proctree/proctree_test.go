package proctree

import (
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestDescendants(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var kids []int
	for deadline := time.Now().Add(5 * time.Second); len(kids) == 0 && time.Now().Before(deadline); {
		kids = Descendants(cmd.Process.Pid)
		time.Sleep(10 * time.Millisecond)
	}
	if len(kids) != 1 || slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("descendants of the shell = %v, want its sleep alone", kids)
	}
	KillDescendants(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the shell's wait ended with %v, want its sleep killed and a clean exit", err)
	}
}
