package catalog

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// maxLogLine bounds one re-logged stderr line; longer lines are cut so a
// server printing a huge blob cannot flood the daemon's log.
const maxLogLine = 4096

// lineLogger re-logs a server's stderr through hclog, one entry per line.
// exec.Cmd copies the child's stderr into it from its own goroutine, so
// Write never blocks on anything but the logger.
type lineLogger struct {
	log hclog.Logger
	// mask, when set, hides the config's secrets in the lines.
	mask *atomic.Pointer[secretMask]
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
	if w.mask != nil {
		w.last = w.mask.Load().string(w.last)
	}
	w.log.Info(w.last, "stream", "stderr")
}

// lastLine is the last line logged, which usually says why a server that
// exited at start failed.
func (w *lineLogger) lastLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
