package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
