package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// HostSocket is where a sandbox finds the host's channel socket, when its
// backend mounts one (sandbox.Capabilities.HostMounts). A program whose
// execution came with a host token (sandbox.ExecRequest.HostToken) makes
// its host calls there instead of on descriptor 3, which saves the relay
// through the zygote and the backend.
//
// The program's process connects once, on its first host call, and sends
//
//	{"op":"hello","token":"..."}
//
// then the same call frames it would send on descriptor 3; the host
// answers each with a reply frame ({"op":"reply","id":7,...}, "exec"
// empty). A token the host does not know on that socket gets
//
//	{"op":"refused","error":"..."}
//
// and the connection is closed. Output stays on the program's pipes.
//
// The zygote itself connects once at start, before it reports ready, and
// sends
//
//	{"op":"control"}
//
// A host that takes the connection as a second control channel answers
//
//	{"op":"welcome"}
//
// and from then on speaks the control protocol on it as on descriptors 3
// and 4 (exec, reply, cancel, ping, end_session; the zygote sends ready on
// it first). Executions then go from the host to the zygote without the
// backend on the way. The zygote serves executions from either channel,
// one at a time; frames of the other channel wait until the execution has
// ended. A host grants control only while the sandbox is being created, when
// the zygote is the only process in it, and to one connection; any other
// answer leaves the zygote on descriptors 3 and 4 alone.
const HostSocket = "/cexec/host.sock"

// Ops of the first frame on the host socket.
const (
	// HelloExecution is a program's connection, with its execution's token.
	HelloExecution = "hello"
	// HelloControl is the zygote's, asking to be controlled through it.
	HelloControl = "control"
)

// HostHello is the first frame on the host socket.
type HostHello struct {
	Op    string `json:"op"`
	Token string `json:"token,omitempty"`
}

// ReadHostHello reads the first frame of a connection to the host socket:
// a program's hello with a token or the zygote's control request.
func ReadHostHello(r *bufio.Reader) (HostHello, error) {
	kind, payload, err := readFrame(r)
	if err != nil {
		return HostHello{}, fmt.Errorf("read hello: %w", err)
	}
	var h HostHello
	if kind != kindJSON || json.Unmarshal(payload, &h) != nil || !(h.Op == HelloExecution && h.Token != "" || h.Op == HelloControl && h.Token == "") {
		return HostHello{}, errors.New("read hello: the first frame is neither a hello with a token nor a control request")
	}
	return h, nil
}

// WriteHostWelcome tells the zygote that the host takes its connection as
// a control channel.
func WriteHostWelcome(w io.Writer) error {
	b, err := encode(map[string]string{"op": "welcome"})
	if err != nil {
		return err
	}
	_, err = w.Write(appendFrame(nil, kindJSON, b))
	return err
}

// WriteHostRefusal tells the peer why its connection is closed.
func WriteHostRefusal(w io.Writer, reason string) error {
	b, err := encode(map[string]string{"op": "refused", "error": reason})
	if err != nil {
		return err
	}
	_, err = w.Write(appendFrame(nil, kindJSON, b))
	return err
}

// ServeHostCalls answers the host calls of one connection to the host
// socket with host, maxCalls of them at once (<= 0: DefaultMaxCalls), each
// with ctx, and returns when the peer closes the connection or breaks the
// protocol, after every call has returned. Errors become what the program
// raises as they do on the relayed path: a *sandbox.CallError as it is,
// any other error as sandbox.DefaultCallErrorType.
func ServeHostCalls(ctx context.Context, r *bufio.Reader, w io.Writer, host sandbox.Host, maxCalls int) error {
	if maxCalls <= 0 {
		maxCalls = DefaultMaxCalls
	}
	sem := make(chan struct{}, maxCalls)
	var (
		calls sync.WaitGroup
		wmu   sync.Mutex
		werr  error
	)
	defer calls.Wait()
	for {
		kind, payload, err := readFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if kind != kindJSON {
			return fmt.Errorf("%w: an output frame on the host socket", errBadFrame)
		}
		var m inMsg
		if err := json.Unmarshal(payload, &m); err != nil || m.Op != "call" {
			return fmt.Errorf("%w: the host socket takes call frames only", errBadFrame)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		calls.Add(1)
		go func() {
			defer func() {
				<-sem
				calls.Done()
			}()
			b, err := hostReply(ctx, host, &m).encode()
			if err != nil {
				b, _ = replyMsg{Op: "reply", ID: m.ID, Error: err.Error(), ErrorType: sandbox.DefaultCallErrorType}.encode()
			}
			frame := appendFrame(make([]byte, 0, headerSize+len(b)), kindJSON, b)
			wmu.Lock()
			defer wmu.Unlock()
			if werr == nil {
				_, werr = w.Write(frame)
			}
		}()
	}
}
