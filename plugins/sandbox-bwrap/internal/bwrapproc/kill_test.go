package bwrapproc

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestKillTakesChildren: a parent killed by Kill does not leave its
// children to pid 1, as a bwrap killed mid-setup would leave its sandbox.
func TestKillTakesChildren(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 100 & sleep 100 & echo started; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf), "started") {
		t.Fatalf("read %q: %v", buf, err)
	}
	kids := ChildPIDs(cmd.Process.Pid)
	if len(kids) != 2 {
		t.Fatalf("children %v, want the two sleeps", kids)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	Kill(cmd.Process, exited)
	<-exited
	deadline := time.Now().Add(5 * time.Second)
	for _, k := range kids {
		for {
			state, _ := Stat(k)
			if state == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d survived its parent (state %c)", k, state)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
