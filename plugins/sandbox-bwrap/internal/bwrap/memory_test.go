package bwrap

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestStatusKB(t *testing.T) {
	for _, tc := range []struct {
		name, data, key string
		want            int64
		ok              bool
	}{
		{"rollup", "55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss: 12 kB\nPss: 7 kB\n", "Pss:", 7 << 10, true},
		{"status", "Name:\tpython3\nVmRSS:\t  12800 kB\nVmData: 1 kB\n", "VmRSS:", 12800 << 10, true},
		{"missing", "Rss: 12 kB\n", "Pss:", 0, false},
		{"empty value", "Pss:\n", "Pss:", 0, false},
		{"not a number", "Pss: lots kB\n", "Pss:", 0, false},
		{"prefix of another key", "Pss_Anon: 3 kB\nPss: 5 kB\n", "Pss:", 5 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := statusKB(tc.data, tc.key)
			if got != tc.want || ok != tc.ok {
				t.Errorf("statusKB = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestTreeMemory checks the walk on a real process tree: a shell with two
// children, and a grandchild under one of them.
func TestTreeMemory(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & sh -c 'sleep 60 & wait' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range processTree(cmd.Process.Pid)[1:] {
			_ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var tree []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if tree = processTree(cmd.Process.Pid); len(tree) == 4 {
			break
		}
	}
	if len(tree) != 4 || tree[0] != cmd.Process.Pid {
		t.Fatalf("tree of %d = %v, want the shell, its two children and a grandchild", cmd.Process.Pid, tree)
	}
	var comms []string
	var sum int64
	for _, pid := range tree {
		pss, ok := procPSS(pid)
		if !ok || pss <= 0 {
			t.Fatalf("no PSS for %d", pid)
		}
		sum += pss
		comms = append(comms, comm(t, pid))
	}
	slices.Sort(comms)
	if want := []string{"sh", "sh", "sleep", "sleep"}; !slices.Equal(comms, want) {
		t.Errorf("tree commands %v, want %v", comms, want)
	}
	// The processes are idle, so their PSS holds still but for pages they
	// share with processes starting and ending elsewhere.
	if got := treeMemory(cmd.Process.Pid, cmd.Process.Pid); got < sum*9/10 || got > sum*11/10 {
		t.Errorf("treeMemory = %d, want about %d (the sum of the four processes' PSS)", got, sum)
	}
	if one, _ := procPSS(cmd.Process.Pid); treeMemory(cmd.Process.Pid, cmd.Process.Pid) <= one {
		t.Errorf("treeMemory counts only the root (%d bytes)", one)
	}
}

// TestListMemory checks that List reports a sandbox's memory as the PSS of
// all its processes, the fork server and the spare included, not the
// zygote's alone.
func TestListMemory(t *testing.T) {
	p := New(nil)
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	if caps, _ := p.Capabilities(ctx); !caps.Available {
		testutil.SkipMissing(t, "%s", caps.UnavailableReason)
	}
	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "mem", Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}}); err != nil {
		t.Fatal(err)
	}
	h := &plugintest.Host{}
	if _, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "mem", Code: "print(1)"}, h); err != nil || h.Stdout() != "1\n" {
		t.Fatalf("exec: %v %q", err, h.Stdout())
	}
	bx, err := p.boxes.Get("mem")
	if err != nil {
		t.Fatal(err)
	}
	// Idle: bwrap's monitor, the zygote, its fork server and a spare.
	var tree []int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if tree = processTree(bx.cmd.Process.Pid); len(tree) >= 4 {
			break
		}
	}
	if len(tree) < 4 {
		t.Fatalf("idle sandbox has processes %v, want bwrap, the zygote, the fork server and a spare", tree)
	}
	var zygote, rest int64
	for _, pid := range tree {
		pss, ok := procPSS(pid)
		if !ok {
			t.Skipf("PSS of %d unreadable (no CAP_SYS_PTRACE?)", pid)
		}
		if pid == bx.zygotePID {
			zygote = pss
		} else {
			rest += pss
		}
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	got := list[0].RSSBytes
	if got < zygote+rest*8/10 || got > (zygote+rest)*12/10 {
		t.Errorf("List reports %d bytes; the zygote's PSS is %d and the other processes' %d", got, zygote, rest)
	}
}

func comm(t *testing.T, pid int) string {
	t.Helper()
	data, err := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		t.Fatalf("ps %d: %v", pid, err)
	}
	return strings.TrimSpace(string(data))
}
