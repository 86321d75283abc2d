// Package tailbuf keeps the last bytes written to it, such as the end of a
// child process's stderr, for error messages: what a process said just
// before it died is what explains it, and everything before that only costs
// memory.
package tailbuf

import (
	"strings"
	"sync"
)

// Buffer keeps the last Max bytes written to it. It is safe for concurrent
// use; the zero value keeps nothing, so make one with New.
type Buffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped bool
}

// New returns a Buffer that keeps the last max bytes.
func New(max int) *Buffer {
	return &Buffer{max: max}
}

// Write keeps the end of what was written so far; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.dropped = true
	}
	return len(p), nil
}

// WriteLine writes line and a newline, for callers that read a stream line
// by line.
func (b *Buffer) WriteLine(line string) {
	_, _ = b.Write([]byte(line + "\n"))
}

// String returns the kept bytes. When the beginning was dropped it starts
// at the first whole line, so that a message does not open mid-word; a
// single line longer than Max is returned as its end.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := string(b.buf)
	if b.dropped {
		if _, rest, ok := strings.Cut(s, "\n"); ok && rest != "" {
			s = rest
		}
	}
	return s
}
