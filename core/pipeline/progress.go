package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// MethodProgress is the host call of cexec.progress(done, total, message).
const MethodProgress = "progress"

// ProgressInterval is the least time between two progress reports of one
// execution: a program printing thousands of lines a second sends a few
// reports, each with its latest line.
const ProgressInterval = 250 * time.Millisecond

// maxProgressMessage bounds a report's message, in runes.
const maxProgressMessage = 200

// Progress is one progress report of a running execution. Progress
// increases from one report to the next, as MCP requires of
// notifications/progress; Total is 0 when unknown.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// progressEvent is what happened, before it is worded as a report: the
// program's own cexec.progress, its printed lines, or an upstream's
// progress on a tool call.
type progressEvent struct {
	explicit    bool
	upstream    bool
	done, total float64
	message     string
}

// progressReporter turns an execution's output, its cexec.progress calls and
// its upstreams' progress into throttled reports. Reports go out from one
// goroutine, so a slow tokenizer or client never holds up the program's
// output; none goes out after stop returns, so the last report precedes the
// reply.
type progressReporter struct {
	send func(Progress)
	// tokenize, when set, puts a message in its model-facing form; a
	// message it fails on is dropped (the report keeps its numbers).
	tokenize func(context.Context, string) (string, error)
	log      hclog.Logger
	// oneCall: the reports are of a single tool call (the face's
	// call_tool), whose upstream's numbers are the request's own.
	oneCall bool

	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	mu       sync.Mutex
	pending  *progressEvent
	explicit bool
	lines    int
	partial  []byte
	// sent is the last report's progress; -1 before the first.
	sent float64
}

func newProgressReporter(send func(Progress), tokenize func(context.Context, string) (string, error), log hclog.Logger, oneCall bool) *progressReporter {
	p := &progressReporter{send: send, tokenize: tokenize, log: log, oneCall: oneCall, sent: -1,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// stop ends the reports; a pending one is dropped, since the reply says
// more.
func (p *progressReporter) stop() {
	close(p.quit)
	<-p.done
}

func (p *progressReporter) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.quit
		cancel()
	}()
	for {
		select {
		case <-p.quit:
			return
		case <-p.wake:
		}
		p.mu.Lock()
		ev := p.pending
		p.pending = nil
		p.mu.Unlock()
		if ev != nil {
			p.report(ctx, *ev)
		}
		select {
		case <-p.quit:
			return
		case <-time.After(ProgressInterval):
		}
	}
}

// report words ev and sends it. Printed lines count as they are; an
// upstream's numbers are on its own scale, so its report advances by one
// and the message has them (but for a single call, whose numbers they
// are, while they increase); the program's cexec.progress values are sent
// as they are unless they do not exceed the last report's (lines reported
// before, a value going back): then they too advance by one and go into
// the message. So every report increases, as MCP requires.
func (p *progressReporter) report(ctx context.Context, ev progressEvent) {
	msg := ev.message
	if msg != "" && p.tokenize != nil {
		t, err := p.tokenize(ctx, msg)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("progress message could not be tokenized; sending the count alone", "error", err)
			}
			msg = ""
		} else {
			msg = t
		}
	}
	if ctx.Err() != nil {
		return
	}
	r := Progress{Progress: ev.done, Total: ev.total, Message: msg}
	switch {
	case ev.upstream && (!p.oneCall || ev.done <= p.sent):
		r = Progress{Progress: p.sent + 1, Message: msg}
	case ev.done <= p.sent:
		r = Progress{Progress: p.sent + 1, Message: msg}
		if ev.explicit {
			r.Message = joinMessage(formatCount(ev.done, ev.total), msg)
		}
	}
	p.sent = r.Progress
	p.send(r)
}

func formatCount(done, total float64) string {
	if total > 0 {
		return fmt.Sprintf("%g/%g", done, total)
	}
	return fmt.Sprintf("%g", done)
}

func joinMessage(a, b string) string {
	if b == "" {
		return a
	}
	return a + ": " + b
}

func (p *progressReporter) post(ev progressEvent) {
	p.mu.Lock()
	p.pending = &ev
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// output counts printed lines and reports the last complete one, until the
// program reports its own progress.
func (p *progressReporter) output(stream sandbox.Stream, data []byte) {
	p.mu.Lock()
	if p.explicit {
		p.mu.Unlock()
		return
	}
	n := bytes.Count(data, []byte{'\n'})
	if n == 0 {
		if stream == sandbox.Stdout && len(p.partial) < 4<<10 {
			p.partial = append(p.partial, data...)
		}
		p.mu.Unlock()
		return
	}
	p.lines += n
	last := ""
	if stream == sandbox.Stdout {
		// The last complete line: after the last-but-one newline of
		// what was held and what came.
		buf := append(p.partial, data[:bytes.LastIndexByte(data, '\n')]...)
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
		last = cutMessage(string(buf))
		rest := data[bytes.LastIndexByte(data, '\n')+1:]
		p.partial = append(p.partial[:0], rest[:min(len(rest), 4<<10)]...)
	}
	lines := p.lines
	p.mu.Unlock()
	msg := fmt.Sprintf("%d lines printed", lines)
	if lines == 1 {
		msg = "1 line printed"
	}
	if last != "" {
		msg += "; last: " + last
	}
	p.post(progressEvent{done: float64(lines), message: msg})
}

// upstream reports an upstream's progress on a tool call of the program.
func (p *progressReporter) upstream(server, tool string, done, total float64, message string) {
	p.post(progressEvent{upstream: true, done: done, total: total,
		message: joinMessage(fmt.Sprintf("%s/%s %s", server, tool, formatCount(done, total)), cutMessage(message))})
}

// progressParams are cexec.progress's arguments.
type progressParams struct {
	Progress *float64 `json:"progress"`
	Total    *float64 `json:"total"`
	Message  *string  `json:"message"`
}

// call handles cexec.progress: the program's own numbers lead from then on.
func (p *progressReporter) call(params json.RawMessage) (json.RawMessage, error) {
	var a progressParams
	if err := json.Unmarshal(params, &a); err != nil {
		return nil, &sandbox.CallError{Type: "TypeError", Message: "cexec.progress: " + err.Error()}
	}
	if a.Progress == nil || math.IsNaN(*a.Progress) || math.IsInf(*a.Progress, 0) || *a.Progress < 0 {
		return nil, &sandbox.CallError{Type: "ValueError", Message: "cexec.progress: done must be a finite number of at least 0"}
	}
	ev := progressEvent{explicit: true, done: *a.Progress}
	if a.Total != nil {
		if math.IsNaN(*a.Total) || math.IsInf(*a.Total, 0) || *a.Total <= 0 {
			return nil, &sandbox.CallError{Type: "ValueError", Message: "cexec.progress: total must be a finite number above 0, or None"}
		}
		ev.total = *a.Total
	}
	if a.Message != nil {
		ev.message = cutMessage(*a.Message)
	}
	p.mu.Lock()
	p.explicit = true
	p.mu.Unlock()
	p.post(ev)
	return json.RawMessage("null"), nil
}

// acrossAttempts keeps the reports of a task's programs increasing across
// its attempts, since a repair's program counts from the start again: a
// report that does not exceed the last one advances by one, with its
// numbers in the message.
func acrossAttempts(send func(Progress)) func(Progress) {
	if send == nil {
		return nil
	}
	var mu sync.Mutex
	last := -1.0
	return func(r Progress) {
		mu.Lock()
		defer mu.Unlock()
		if r.Progress <= last {
			msg := r.Message
			if r.Total > 0 {
				msg = joinMessage(formatCount(r.Progress, r.Total), msg)
			}
			r = Progress{Progress: last + 1, Message: msg}
		}
		last = r.Progress
		send(r)
	}
}

// cutMessage keeps a message to one short line.
func cutMessage(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if utf8.RuneCountInString(s) <= maxProgressMessage {
		return s
	}
	r := []rune(s)
	return string(r[:maxProgressMessage-1]) + "…"
}
