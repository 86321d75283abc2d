package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// daemonLog is a Log writing only the daemon's own log, in a temp dir.
func daemonLog(t *testing.T, rotate int64, keep int) (*Log, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	return New(Options{DaemonDir: dir, RotateSize: rotate, Keep: keep}), dir
}

func recordN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := range n {
		ev := Event{Type: TypeToolCall, Server: "memory", Tool: "read_graph", Outcome: "ok", ArgsSHA256: Hash([]byte{byte(i)})}
		if err := l.Record(context.Background(), "", ev); err != nil {
			t.Fatal(err)
		}
	}
}

func verify(t *testing.T, dir string) Report {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rep, err := VerifyDir(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// rewrite applies edit to the lines of dir's current file.
func rewrite(t *testing.T, dir string, edit func([][]byte) [][]byte) {
	t.Helper()
	p := filepath.Join(dir, current)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = edit(lines[:len(lines)-1])
	if err := os.WriteFile(p, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name   string
		edit   func([][]byte) [][]byte
		line   int
		reason string
	}{
		{"edited field", func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"outcome":"ok"`), []byte(`"outcome":"no"`), 1)
			return l
		}, 3, "edited"},
		{"edited and rehashed alone", func(l [][]byte) [][]byte {
			var r record
			r.Seq, r.Prev = 3, zeroHash
			line, _, _ := encode(&r)
			l[2] = line
			return l
		}, 3, "does not link"},
		{"removed line", func(l [][]byte) [][]byte { return append(l[:1], l[2:]...) }, 2, "removed or inserted"},
		{"swapped lines", func(l [][]byte) [][]byte { l[1], l[2] = l[2], l[1]; return l }, 2, "removed or inserted"},
		{"torn tail", func(l [][]byte) [][]byte { l[4] = l[4][:10]; return l }, 5, "incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, dir := daemonLog(t, 1<<20, 2)
			recordN(t, l, 5)
			if rep := verify(t, dir); rep.Broken != nil || rep.Lines != 5 || rep.FirstSeq != 1 || rep.LastSeq != 5 {
				t.Fatalf("before the edit: %+v", rep)
			}
			rewrite(t, dir, tt.edit)
			rep := verify(t, dir)
			if rep.Broken == nil {
				t.Fatalf("edit not detected: %+v", rep)
			}
			if rep.Broken.Line != tt.line || !strings.Contains(rep.Broken.Reason, tt.reason) {
				t.Errorf("broken at %s; want line %d, %q", rep.Broken, tt.line, tt.reason)
			}
		})
	}
}

// TestRemovedTailDetectedByWriter: the writer knows the last seq it wrote.
func TestRemovedTailDetectedByWriter(t *testing.T) {
	l, dir := daemonLog(t, 1<<20, 2)
	recordN(t, l, 4)
	rewrite(t, dir, func(l [][]byte) [][]byte { return l[:3] })
	rep, err := l.Verify(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Broken == nil || !strings.Contains(rep.Broken.Reason, "last lines were removed") {
		t.Fatalf("removed tail not reported: %+v", rep.Broken)
	}
}

// TestRemovedTailAfterRotation: the break names the line of the current
// file where the removed lines were, not a count over every file.
func TestRemovedTailAfterRotation(t *testing.T) {
	l, dir := daemonLog(t, 4096, 2)
	recordN(t, l, 40)
	kept := 0
	rewrite(t, dir, func(l [][]byte) [][]byte {
		kept = len(l) - 1
		return l[:kept]
	})
	if rep := verify(t, dir); len(rep.Files) < 2 {
		t.Fatalf("want rotated files before the current one, got %v", rep.Files)
	}
	rep, err := l.Verify(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Broken == nil || rep.Broken.File != current || rep.Broken.Line != kept+1 {
		t.Fatalf("broken at %v; want %s line %d", rep.Broken, current, kept+1)
	}
}

// TestRotationKeepsChain: rotated files link to each other; a new Log on
// the same folder (a restarted daemon) continues the chain; old files
// beyond keep go, and verify starts at the oldest kept.
func TestRotationKeepsChain(t *testing.T) {
	l, dir := daemonLog(t, 4096, 2)
	recordN(t, l, 40)
	l2 := New(Options{DaemonDir: dir, RotateSize: 4096, Keep: 2})
	recordN(t, l2, 40)
	rep := verify(t, dir)
	if rep.Broken != nil {
		t.Fatalf("chain broken: %s", rep.Broken)
	}
	if len(rep.Files) != 3 || rep.Files[2] != current {
		t.Errorf("files %v: want 2 rotated and the current one", rep.Files)
	}
	if rep.LastSeq != 80 || rep.FirstSeq <= 1 || rep.Lines != int(rep.LastSeq-rep.FirstSeq+1) {
		t.Errorf("report %+v: want seqs up to 80, the oldest rotated away", rep)
	}
}

// TestTornLineCut: a crash's torn last line is cut by the next writer and
// the chain goes on.
func TestTornLineCut(t *testing.T) {
	l, dir := daemonLog(t, 1<<20, 2)
	recordN(t, l, 3)
	f, err := os.OpenFile(filepath.Join(dir, current), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"seq":4,"prev":"`)
	_ = f.Close()
	recordN(t, New(Options{DaemonDir: dir, RotateSize: 1 << 20, Keep: 2}), 1)
	if rep := verify(t, dir); rep.Broken != nil || rep.LastSeq != 4 {
		t.Fatalf("after the cut: %+v", rep)
	}
}

// BenchmarkRecord is an execution's audit append: its entry and one tool
// call, one write(2).
func BenchmarkRecord(b *testing.B) {
	l := New(Options{DaemonDir: filepath.Join(b.TempDir(), "audit"), RotateSize: 16 << 20, Keep: 2})
	ctx := context.Background()
	evs := []Event{
		{Type: TypeExecution, Session: "s1", Actor: "agent", Outcome: "ok", DurationMS: 12.5, CodeSHA256: Hash([]byte("print(1)"))},
		{Type: TypeToolCall, Session: "s1", Actor: "agent", Server: "memory", Tool: "read_graph", Outcome: "ok", DurationMS: 3.2, ArgsSHA256: Hash([]byte("{}"))},
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Record(ctx, "", evs...); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReplicasAppendToOneChain: two daemons on one data_dir (replicas,
// Options.Shared) append to the same log at once, through rotations: the
// chain holds, every seq once, in order.
func TestReplicasAppendToOneChain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	logs := []*Log{
		New(Options{DaemonDir: dir, RotateSize: 4096, Keep: 1000, Shared: true}),
		New(Options{DaemonDir: dir, RotateSize: 4096, Keep: 1000, Shared: true}),
	}
	var wg sync.WaitGroup
	for _, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				ev := Event{Type: TypeToolCall, Server: "memory", Tool: "read_graph", Outcome: "ok", ArgsSHA256: Hash([]byte{byte(i)})}
				if err := l.Record(context.Background(), "", ev); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rep := verify(t, dir)
	if rep.Broken != nil {
		t.Fatalf("chain broken: %s", rep.Broken)
	}
	if rep.FirstSeq != 1 || rep.LastSeq != 200 || rep.Lines != 200 || len(rep.Files) < 3 {
		t.Fatalf("report %+v: want seqs 1 to 200 over several rotated files", rep)
	}
}
