package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// execMsg is the frame that starts an execution in the zygote.
type execMsg struct {
	Op          string `json:"op"`
	ID          string `json:"id"`
	Code        string `json:"code"`
	TimeoutMS   int64  `json:"timeout_ms"`
	OutputLimit int64  `json:"output_limit"`
	Persistent  bool   `json:"persistent"`
	Session     string `json:"session"`
	// HostToken goes to the execution's process alone (HostSocket).
	HostToken string `json:"host_token,omitempty"`
	// FreshGlobals: see sandbox.ExecRequest.FreshGlobals.
	FreshGlobals bool `json:"fresh_globals,omitempty"`
}

type replyMsg struct {
	Op        string          `json:"op"`
	Exec      string          `json:"exec"`
	ID        json.RawMessage `json:"id"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
}

// replyPrefix starts every reply frame, so that the zygote can forward a
// reply to the program without decoding it (cexec/_zygote.py read_host).
const replyPrefix = `{"op":"reply","exec":`

// encode returns the reply's frame payload. A result is spliced in as it
// is: call has checked it with json.Valid, and encoding it again would
// scan and copy it once more, which for large results costs more than the
// rest of the call's way through the plugin.
func (m replyMsg) encode() ([]byte, error) {
	if m.Result == nil {
		return encode(m)
	}
	execID, err := json.Marshal(m.Exec)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(replyPrefix)+len(execID)+len(m.ID)+len(m.Result)+20)
	b = append(b, replyPrefix...)
	b = append(b, execID...)
	b = append(b, `,"id":`...)
	if len(m.ID) == 0 {
		b = append(b, "null"...)
	}
	b = append(b, m.ID...)
	b = append(b, `,"result":`...)
	b = append(b, m.Result...)
	return append(b, '}'), nil
}

// Exec runs one program and returns its result. A result with SandboxOK
// false means the sandbox must not be reused. The error is non-nil only
// when nothing could run (the zygote is gone: pluginapi.ErrUnavailable),
// ctx ended before the execution started, the program does not fit in a
// frame (pluginapi.ErrInvalidArgument), or host.Output failed (the program
// was then cancelled; the result describes it).
func (r *Runner) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	select {
	case r.execSem <- struct{}{}:
	case <-r.dead:
		return sandbox.ExecResult{}, r.unavailable()
	case <-ctx.Done():
		return sandbox.ExecResult{}, ctx.Err()
	}
	defer func() { <-r.execSem }()
	if !r.Healthy() {
		return sandbox.ExecResult{}, r.unavailable()
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = r.opts.Timeout
	}
	id := "x" + strconv.FormatUint(r.seq.Add(1), 10)
	start, err := encode(execMsg{Op: "exec", ID: id, Code: req.Code, TimeoutMS: timeout.Milliseconds(),
		OutputLimit: r.opts.OutputLimit, Persistent: req.Persistent, Session: req.Session, HostToken: req.HostToken,
		FreshGlobals: req.FreshGlobals})
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("encode program: %w: %v", pluginapi.ErrInvalidArgument, err)
	}
	if len(start) > MaxFrame {
		return sandbox.ExecResult{}, fmt.Errorf("program of %d bytes: %w: too large for the sandbox runner", len(req.Code), pluginapi.ErrInvalidArgument)
	}
	e := &execution{
		r:       r,
		id:      id,
		host:    host,
		st:      &execState{frames: make(chan frame, 64), done: make(chan struct{})},
		sem:     make(chan struct{}, r.opts.MaxCalls),
		timeout: timeout,
	}
	r.mu.Lock()
	r.cur = e.st
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cur = nil
		r.mu.Unlock()
		close(e.st.done)
	}()
	var cancelCalls context.CancelFunc
	e.callCtx, cancelCalls = context.WithCancel(ctx)
	defer cancelCalls()
	began := time.Now()
	r.queue1(start)
	res, err := e.run(ctx)
	res.Duration = time.Since(began)
	return res, err
}

type execution struct {
	r       *Runner
	id      string
	host    sandbox.Host
	st      *execState
	callCtx context.Context
	sem     chan struct{}
	timeout time.Duration

	outBytes  int64
	truncated bool
	cancelled bool
	outputErr error
}

func (e *execution) run(ctx context.Context) (sandbox.ExecResult, error) {
	r := e.r
	deadline := time.NewTimer(e.timeout + r.opts.Grace)
	defer deadline.Stop()
	done := ctx.Done()
	for {
		select {
		case f := <-e.st.frames:
			if f.kind != kindJSON {
				e.output(f)
				if e.outputErr != nil {
					// Nobody receives the output any more: stop the program.
					e.cancel(deadline)
				}
				continue
			}
			switch f.msg.Op {
			case "call":
				go e.call(f.msg)
			case "result":
				if !e.ours(f) {
					r.log.Debug("dropping result of another execution", "id", string(f.msg.ID))
					continue
				}
				return e.result(f.msg), e.outputErr
			}
		case <-done:
			done = nil
			e.cancel(deadline)
		case <-r.dead:
			if m := e.queuedResult(); m != nil {
				return e.result(m), e.outputErr
			}
			return e.broken("Killed", fmt.Sprintf("the sandbox's runner stopped during the execution: %v", r.err)), e.outputErr
		case <-deadline.C:
			if e.cancelled {
				r.kill(errors.New("the sandbox runner did not stop a cancelled execution"))
				return e.broken("Killed", "the execution was cancelled; the sandbox was killed"), e.outputErr
			}
			r.kill(fmt.Errorf("the sandbox runner did not stop an execution at its %s deadline", e.timeout))
			res := e.broken("Timeout", fmt.Sprintf("the program ran longer than its %s limit; the sandbox was killed", e.timeout))
			res.TimedOut = true
			return res, e.outputErr
		}
	}
}

// ours reports whether f is this execution's result.
func (e *execution) ours(f frame) bool {
	var id string
	return f.kind == kindJSON && f.msg.Op == "result" && json.Unmarshal(f.msg.ID, &id) == nil && id == e.id
}

// queuedResult returns the result if it arrived just before the zygote
// went away, and is still queued.
func (e *execution) queuedResult() *inMsg {
	for {
		select {
		case f := <-e.st.frames:
			if e.ours(f) {
				return f.msg
			}
		default:
			return nil
		}
	}
}

// cancel asks the zygote to kill the program and gives it Grace to report.
func (e *execution) cancel(deadline *time.Timer) {
	if e.cancelled {
		return
	}
	e.cancelled = true
	e.r.send(map[string]string{"op": "cancel", "id": e.id})
	deadline.Reset(e.r.opts.Grace)
}

func (e *execution) output(f frame) {
	if e.truncated || e.outputErr != nil {
		return
	}
	data := f.data
	if room := e.r.opts.OutputLimit - e.outBytes; int64(len(data)) > room {
		// The zygote should have stopped the program; it is not to be
		// trusted any more.
		data = data[:room]
		e.truncated = true
		e.r.kill(errors.New("the sandbox runner let output exceed the limit"))
	}
	e.outBytes += int64(len(data))
	if len(data) == 0 {
		return
	}
	stream := sandbox.Stdout
	if f.kind == kindStderr {
		stream = sandbox.Stderr
	}
	if err := e.host.Output(stream, data); err != nil {
		e.outputErr = fmt.Errorf("deliver output: %w", err)
	}
}

// call performs one host call for the program.
func (e *execution) call(m *inMsg) {
	select {
	case e.sem <- struct{}{}:
	case <-e.callCtx.Done():
		return
	}
	defer func() { <-e.sem }()
	rep := hostReply(e.callCtx, e.host, m)
	rep.Exec = e.id
	select {
	case <-e.st.done:
		// The zygote drops replies to an execution that ended.
		return
	default:
	}
	b, err := rep.encode()
	if err != nil {
		e.r.kill(fmt.Errorf("encode frame: %w", err))
		return
	}
	e.r.queue1(b)
}

// hostReply makes one host call and words its outcome as a reply, the
// same on the relayed path and on the host socket. An error that is not a
// *sandbox.CallError, or one without a type, becomes a ToolError for
// call_tool and a HostError (sandbox.DefaultCallErrorType) otherwise.
func hostReply(ctx context.Context, host sandbox.Host, m *inMsg) replyMsg {
	params := m.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	rep := replyMsg{Op: "reply", ID: m.ID}
	res, err := host.Call(ctx, m.Method, params)
	var ce *sandbox.CallError
	switch {
	case errors.As(err, &ce):
		rep.Error, rep.ErrorType = ce.Message, ce.Type
		if rep.ErrorType == "" {
			rep.ErrorType = defaultErrorType(m.Method)
		}
	case err != nil:
		rep.Error, rep.ErrorType = err.Error(), defaultErrorType(m.Method)
	case len(res) == 0:
		rep.Result = json.RawMessage("null")
	case len(res) > MaxCallData:
		// The reply would break the frame to the sandbox.
		rep.Error, rep.ErrorType = fmt.Sprintf("the result of %s is %d MiB, over the %d MiB a host call carries; ask for less per call",
			m.Method, len(res)>>20, MaxCallData>>20), "ResultTooLarge"
	case !json.Valid(res):
		rep.Error, rep.ErrorType = "the host returned a result that is not valid JSON", sandbox.DefaultCallErrorType
	default:
		rep.Result = res
	}
	return rep
}

// defaultErrorType is the type of a host call's error that names none.
func defaultErrorType(method string) string {
	if method == "call_tool" {
		return "ToolError"
	}
	return sandbox.DefaultCallErrorType
}

func (e *execution) result(m *inMsg) sandbox.ExecResult {
	res := sandbox.ExecResult{
		ExitCode:        m.ExitCode,
		Result:          m.Result,
		Usage:           sandbox.Usage{CPU: time.Duration(m.CPUMillis) * time.Millisecond, MaxRSSBytes: m.MaxRSS},
		OutputTruncated: m.Truncated || e.truncated,
		TimedOut:        m.TimedOut,
		SandboxOK:       m.Clean && !m.TimedOut && !m.Cancelled && !e.cancelled && e.r.Healthy(),
		SessionLost:     m.SessionLost,
	}
	if m.Error != nil {
		res.Error = &sandbox.ExecError{Type: m.Error.Type, Message: m.Error.Message, Traceback: m.Error.Traceback}
	}
	if e.cancelled && res.Error == nil {
		res.Error = &sandbox.ExecError{Type: "Killed", Message: "the execution was cancelled"}
	}
	return res
}

// broken is the result of an execution whose sandbox died or was killed.
func (e *execution) broken(typ, msg string) sandbox.ExecResult {
	return sandbox.ExecResult{
		ExitCode:        137,
		Error:           &sandbox.ExecError{Type: typ, Message: msg},
		OutputTruncated: e.truncated,
		SandboxOK:       false,
	}
}
