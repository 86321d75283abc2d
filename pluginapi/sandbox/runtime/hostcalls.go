package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// handOffAfter is how long a call answered by the goroutine that read it
// may run before another goroutine takes over reading, so that calls made
// meanwhile (from the program's other threads) are read.
const handOffAfter = 100 * time.Microsecond

// ServeHostCalls answers the host calls of one connection to the host
// socket with host, maxCalls of them at once (<= 0: DefaultMaxCalls), each
// with ctx, and returns when the peer closes the connection or breaks the
// protocol, after every call has returned. Errors become what the program
// raises as they do on the relayed path: a *sandbox.CallError as it is,
// any other error as sandbox.DefaultCallErrorType.
//
// A call that arrives with no other in flight is answered by the
// goroutine that read it. Starting a goroutine for it would wake another
// thread, which on some virtual machines costs more than the rest of the
// round trip; a program calling tools one after the other is the common
// case. Should such a call take longer than handOffAfter, a new goroutine
// reads on, and the first ends with its call.
func ServeHostCalls(ctx context.Context, r *bufio.Reader, w io.Writer, host sandbox.Host, maxCalls int) error {
	if maxCalls <= 0 {
		maxCalls = DefaultMaxCalls
	}
	s := &hostCalls{ctx: ctx, r: r, w: w, host: host, sem: make(chan struct{}, maxCalls), end: make(chan error, 1)}
	go s.read()
	err := <-s.end
	s.calls.Wait()
	return err
}

// hostCalls serves one connection. One goroutine at a time reads it.
type hostCalls struct {
	ctx   context.Context
	r     *bufio.Reader
	w     io.Writer
	host  sandbox.Host
	sem   chan struct{}
	calls sync.WaitGroup
	end   chan error // the reader's error, once: the connection is done

	wmu  sync.Mutex
	werr error
}

// read reads calls until the connection ends or another goroutine takes
// over reading.
func (s *hostCalls) read() {
	for {
		kind, payload, err := readFrame(s.r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.end <- err
			return
		}
		if kind != kindJSON {
			s.end <- fmt.Errorf("%w: an output frame on the host socket", errBadFrame)
			return
		}
		m := new(inMsg)
		if err := json.Unmarshal(payload, m); err != nil || m.Op != "call" {
			s.end <- fmt.Errorf("%w: the host socket takes call frames only", errBadFrame)
			return
		}
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			s.end <- s.ctx.Err()
			return
		}
		s.calls.Add(1)
		if len(s.sem) > 1 || s.r.Buffered() > 0 {
			// Calls at once: each its own goroutine, as their answers may
			// come in any order.
			go s.answer(m)
			continue
		}
		t := time.AfterFunc(handOffAfter, s.read)
		s.answer(m)
		if !t.Stop() {
			return
		}
	}
}

// answer makes one call and writes its reply.
func (s *hostCalls) answer(m *inMsg) {
	defer func() {
		<-s.sem
		s.calls.Done()
	}()
	b, err := hostReply(s.ctx, s.host, m).encode()
	if err != nil {
		b, _ = replyMsg{Op: "reply", ID: m.ID, Error: err.Error(), ErrorType: sandbox.DefaultCallErrorType}.encode()
	}
	frame := appendFrame(make([]byte, 0, headerSize+len(b)), kindJSON, b)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.werr == nil {
		_, s.werr = s.w.Write(frame)
	}
}
