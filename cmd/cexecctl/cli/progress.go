package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/cexec/cexec/internal/bytesize"
)

// Progress reports how far a long operation has come, on stderr. On a
// terminal it is one line redrawn in place (a bar, the count and the time
// taken); elsewhere (a log, CI, a pipe) it is plain lines: one when the
// operation starts, one at each tenth of the way and one when it ends, so
// that output read later still says what happened. A total of 0 means the
// size is unknown (one RPC that says nothing until it returns). On a
// terminal the time taken is redrawn while the operation runs, also when
// no step completes (an upload in flight, a slow benchmark round).
//
// Progress is safe for concurrent use: benchmark workers count through it.
type Progress struct {
	w     io.Writer
	tty   bool
	label string
	total int64
	bytes bool
	now   func() time.Time

	mu       sync.Mutex
	done     int64
	start    time.Time
	drawn    time.Time // when the terminal line was last drawn
	tenth    int64     // plain mode: the last tenth reported
	finished bool
	stop     chan struct{}
	ticker   sync.WaitGroup
}

// redrawEvery bounds how often the terminal line is redrawn: often enough
// to look live, rarely enough to cost nothing measurable in a benchmark.
const redrawEvery = 100 * time.Millisecond

// barWidth is the number of cells of the bar.
const barWidth = 24

// Progress starts a progress report of total steps on the command's
// stderr; a bar when stderr is a terminal, plain lines otherwise. With
// --json it reports nothing: a script reads stdout, and stderr stays for
// errors.
func (e *Env) Progress(label string, total int64) *Progress {
	return e.progress(label, total, false)
}

// ProgressBytes is Progress counting bytes (shown as KiB, MiB, ...).
func (e *Env) ProgressBytes(label string, total int64) *Progress {
	return e.progress(label, total, true)
}

func (e *Env) progress(label string, total int64, bytes bool) *Progress {
	if e.JSON {
		return StartProgress(io.Discard, false, label, total, bytes)
	}
	return StartProgress(e.Stderr, IsTerminal(e.Stderr), label, total, bytes)
}

// IsTerminal reports whether w is a terminal (an *os.File on a tty).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// StartProgress starts a report on w, drawn for a terminal when tty is
// set; bytes shows counts as sizes.
func StartProgress(w io.Writer, tty bool, label string, total int64, bytes bool) *Progress {
	return startProgress(w, tty, label, total, bytes, time.Now, tty)
}

func startProgress(w io.Writer, tty bool, label string, total int64, bytes bool, now func() time.Time, tick bool) *Progress {
	p := &Progress{w: w, tty: tty, label: label, total: total, bytes: bytes, now: now, start: now()}
	if !tty {
		if total > 0 {
			fmt.Fprintf(w, "%s: %s/%s\n", label, p.amount(0), p.amount(total))
		} else {
			fmt.Fprintf(w, "%s ...\n", label)
		}
		return p
	}
	p.draw()
	if tick {
		p.stop = make(chan struct{})
		p.ticker.Go(p.tick)
	}
	return p
}

// tick redraws the line, so that the time taken moves between steps.
func (p *Progress) tick() {
	t := time.NewTicker(redrawEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if !p.finished {
				p.draw()
			}
			p.mu.Unlock()
		}
	}
}

// Add counts n more steps (or bytes) done.
func (p *Progress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.done += n
	if p.tty {
		if p.now().Sub(p.drawn) >= redrawEvery || p.done >= p.total {
			p.draw()
		}
		return
	}
	if p.total > 0 {
		tenth := min(p.done*10/p.total, 10)
		if tenth > p.tenth && tenth < 10 {
			p.tenth = tenth
			fmt.Fprintf(p.w, "%s: %s/%s (%d%%)\n", p.label, p.amount(p.done), p.amount(p.total), tenth*10)
		}
	}
}

// Println prints a line of its own (a result as it comes) without
// breaking the terminal line: it is cleared, the line printed and the bar
// drawn again below it.
func (p *Progress) Println(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && !p.finished {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
	if p.tty && !p.finished {
		p.draw()
	}
}

// Reader counts what is read through r.
func (p *Progress) Reader(r io.Reader) io.Reader {
	return &progressReader{r: r, p: p}
}

type progressReader struct {
	r io.Reader
	p *Progress
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.Add(int64(n))
	return n, err
}

// Done ends the report: on a terminal the line is cleared, so that what
// the command prints next stands alone; in plain mode a last line says it
// finished and how long it took, or that it failed (err not nil).
func (p *Progress) Done(err error) {
	p.mu.Lock()
	if p.finished {
		p.mu.Unlock()
		return
	}
	p.finished = true
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	} else {
		took := p.now().Sub(p.start).Round(time.Millisecond)
		count := ""
		if p.total > 0 {
			count = " " + p.amount(p.done) + "/" + p.amount(p.total)
		}
		if err != nil {
			// The command reports err itself.
			fmt.Fprintf(p.w, "%s: failed after %s%s\n", p.label, took, count)
		} else {
			fmt.Fprintf(p.w, "%s: done in %s%s\n", p.label, took, count)
		}
	}
	p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		p.ticker.Wait()
	}
}

// draw redraws the terminal line; p.mu is held.
func (p *Progress) draw() {
	now := p.now()
	p.drawn = now
	var b strings.Builder
	b.WriteString("\r")
	b.WriteString(p.label)
	b.WriteString(" ")
	if p.total > 0 {
		filled := int(min(p.done, p.total) * barWidth / p.total)
		b.WriteString("[")
		b.WriteString(strings.Repeat("=", filled))
		if filled < barWidth {
			b.WriteString(">")
			b.WriteString(strings.Repeat(" ", barWidth-filled-1))
		}
		fmt.Fprintf(&b, "] %3d%% %s/%s ", min(p.done, p.total)*100/p.total, p.amount(p.done), p.amount(p.total))
	}
	fmt.Fprintf(&b, "%.1fs\x1b[K", now.Sub(p.start).Seconds())
	fmt.Fprint(p.w, b.String())
}

func (p *Progress) amount(n int64) string {
	if p.bytes {
		return bytesize.Format(n)
	}
	return fmt.Sprint(n)
}
