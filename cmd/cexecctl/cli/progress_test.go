package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cexec/cexec/internal/testutil"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func splitLines(s string) []string           { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
func plainProgress(w io.Writer, c *fakeClock, total int64, bytes bool) *Progress {
	return startProgress(w, false, "upload", total, bytes, c.now, false)
}

func TestProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	c := newFakeClock()
	p := plainProgress(&buf, c, 100, false)
	for range 20 {
		c.advance(100 * time.Millisecond)
		p.Add(5)
	}
	p.Done(nil)
	want := []string{"upload: 0/100"}
	for i := 1; i <= 9; i++ {
		want = append(want, "upload: "+strconv.Itoa(i*10)+"/100 ("+strconv.Itoa(i*10)+"%)")
	}
	want = append(want, "upload: done in 2s 100/100")
	if got := splitLines(buf.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.ContainsAny(buf.String(), "\r\x1b") {
		t.Errorf("plain output has terminal control characters: %q", buf.String())
	}
}

func TestProgressPlainUnknownTotalAndFailure(t *testing.T) {
	var buf bytes.Buffer
	c := newFakeClock()
	p := startProgress(&buf, false, "refreshing all servers", 0, false, c.now, false)
	c.advance(1500 * time.Millisecond)
	p.Add(1) // no total: no line per step
	p.Done(errors.New("server gone"))
	p.Done(nil) // a second Done changes nothing
	want := "refreshing all servers ...\nrefreshing all servers: failed after 1.5s\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

func TestProgressPlainBytesReader(t *testing.T) {
	var buf bytes.Buffer
	c := newFakeClock()
	const size = 3 << 20
	p := plainProgress(&buf, c, size, true)
	n, err := io.Copy(io.Discard, p.Reader(bytes.NewReader(make([]byte, size))))
	if err != nil || n != size {
		t.Fatalf("copied %d, %v", n, err)
	}
	p.Done(nil)
	out := buf.String()
	for _, want := range []string{"upload: 0 B/3.0 MiB\n", "upload: 1.5 MiB/3.0 MiB (50%)\n", "upload: done in 0s 3.0 MiB/3.0 MiB\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestProgressTerminalBar(t *testing.T) {
	var buf bytes.Buffer
	c := newFakeClock()
	p := startProgress(&buf, true, "bench exec warm", 100, false, c.now, false)
	first := buf.String()
	if first != "\rbench exec warm [>                       ]   0% 0/100 0.0s\x1b[K" {
		t.Fatalf("first draw %q", first)
	}
	// Within the redraw interval nothing is drawn.
	p.Add(10)
	if buf.String() != first {
		t.Fatalf("redrawn within %s: %q", redrawEvery, buf.String())
	}
	c.advance(redrawEvery)
	p.Add(40)
	if got := buf.String()[len(first):]; got != "\rbench exec warm [============>           ]  50% 50/100 0.1s\x1b[K" {
		t.Fatalf("half-way draw %q", got)
	}
	// The last step is drawn whatever the time.
	n := buf.Len()
	p.Add(50)
	if got := buf.String()[n:]; got != "\rbench exec warm [========================] 100% 100/100 0.1s\x1b[K" {
		t.Fatalf("last draw %q", got)
	}
	n = buf.Len()
	p.Done(nil)
	if got := buf.String()[n:]; got != "\r\x1b[K" {
		t.Fatalf("Done wrote %q, want the line cleared", got)
	}
	if strings.Contains(buf.String(), "\n") {
		t.Errorf("terminal output has a newline: %q", buf.String())
	}
}

func TestProgressTerminalUnknownTotalTicks(t *testing.T) {
	w := &testutil.Buffer{}
	p := StartProgress(w, true, "refreshing", 0, false)
	// The ticker redraws the elapsed time on its own; wait for one redraw
	// (no bound on when: the test waits for the event, not a duration).
	for strings.Count(w.String(), "\rrefreshing ") < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	p.Done(nil)
	if !strings.HasSuffix(w.String(), "\r\x1b[K") {
		t.Fatalf("not cleared at the end: %q", w.String())
	}
	n := len(w.String())
	time.Sleep(2 * redrawEvery)
	if len(w.String()) != n {
		t.Errorf("drawn after Done: %q", w.String()[n:])
	}
}

// TestIsTerminal checks detection on real descriptors: a pipe is not a
// terminal, the slave side of a pseudo-terminal is, and Env.Progress picks
// the mode from it.
func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a bytes.Buffer is a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(); _ = w.Close() }()
	if IsTerminal(w) {
		t.Error("a pipe is a terminal")
	}
	tty := openPTY(t)
	if !IsTerminal(tty) {
		t.Fatal("a pty is not a terminal")
	}
	env := &Env{Stderr: tty}
	p := env.Progress("x", 10)
	if !p.tty {
		t.Error("Env.Progress on a pty is in plain mode")
	}
	p.Done(nil)
	env.Stderr = w
	p = env.Progress("x", 10)
	if p.tty {
		t.Error("Env.Progress on a pipe is in terminal mode")
	}
	p.Done(nil)
}

// openPTY opens a pseudo-terminal and returns its slave side.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = master.Close() })
	// Drain what is written to the slave so writes never block.
	go func() { _, _ = io.Copy(io.Discard, master) }()
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pty slave: %v", err)
	}
	t.Cleanup(func() { _ = slave.Close() })
	return slave
}

func TestProgressPrintln(t *testing.T) {
	c := newFakeClock()
	var plain bytes.Buffer
	p := plainProgress(&plain, c, 2, false)
	p.Println("run %d/%d: ready", 1, 2)
	p.Add(1)
	p.Done(nil)
	if want := "upload: 0/2\nrun 1/2: ready\nupload: 1/2 (50%)\nupload: done in 0s 1/2\n"; plain.String() != want {
		t.Errorf("plain: got %q, want %q", plain.String(), want)
	}

	var tty bytes.Buffer
	p = startProgress(&tty, true, "runs", 2, false, c.now, false)
	n := tty.Len()
	p.Println("run %d/%d: ready", 1, 2)
	// The bar is cleared, the line printed on its own, the bar redrawn.
	if got := tty.String()[n:]; got != "\r\x1b[Krun 1/2: ready\n\rruns [>                       ]   0% 0/2 0.0s\x1b[K" {
		t.Errorf("terminal: got %q", got)
	}
	p.Done(nil)
}

func TestEnvProgressQuietWithJSON(t *testing.T) {
	var buf bytes.Buffer
	env := &Env{Stderr: &buf, JSON: true}
	p := env.Progress("bench", 3)
	p.Add(3)
	p.Done(nil)
	env.ProgressBytes("put", 10).Done(nil)
	if buf.Len() != 0 {
		t.Errorf("--json progress wrote %q", buf.String())
	}
}
