package catalog

import (
	"bytes"
	"context"
	"log/slog"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// maxLogLine bounds one re-logged stderr line; longer lines are cut so a
// server printing a huge blob cannot flood the daemon's log.
const maxLogLine = 4096

// lineLogger re-logs a server's stderr through hclog, one entry per line.
// exec.Cmd copies the child's stderr into it from its own goroutine, so
// Write never blocks on anything but the logger.
type lineLogger struct {
	log  hclog.Logger
	mu   sync.Mutex
	buf  []byte
	last string
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLogLine {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// Close logs a last line that did not end in a newline.
func (w *lineLogger) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
	return nil
}

func (w *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if len(line) > maxLogLine {
		line = append(line[:maxLogLine:maxLogLine], "…"...)
	}
	w.last = string(line)
	w.log.Info(w.last, "stream", "stderr")
}

// lastLine is the last line logged, which usually says why a server that
// exited at start failed.
func (w *lineLogger) lastLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// slogHandler sends mcp-go's slog output to hclog, so the transports' own
// messages land in the daemon's log under the server's name instead of on
// slog's default logger.
type slogHandler struct {
	log   hclog.Logger
	attrs []any
	group string
}

func newSlog(log hclog.Logger) *slog.Logger {
	return slog.New(&slogHandler{log: log})
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.GetLevel() <= hclogLevel(l)
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, h.key(a.Key), a.Value.Resolve().Any())
		return true
	})
	h.log.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, h.key(a.Key), a.Value.Resolve().Any())
	}
	return &n
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	n := *h
	n.group = h.key(name)
	return &n
}

func (h *slogHandler) key(k string) string {
	if h.group == "" {
		return k
	}
	return h.group + "." + k
}

func hclogLevel(l slog.Level) hclog.Level {
	// The transports report connection failures at error level; the
	// catalog handles those (it reconnects) and logs them itself, so they
	// are warnings in the daemon's log.
	switch {
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		// The transports log routine events ("listening to server forever")
		// at info; the daemon's info level is for what operators act on.
		return hclog.Debug
	default:
		return hclog.Trace
	}
}
