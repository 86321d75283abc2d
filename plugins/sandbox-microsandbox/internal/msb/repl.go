package msb

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// replWrapper runs one program in the server's Python REPL, which keeps
// one interpreter per sandbox and feeds it code line by line. It arrives
// base64-encoded in a one-line statement, so blank lines in the program do
// not end it early. A cexec module stands in for the runtime's: result()
// works, every host call (call_tool included) raises, because the REPL has
// no channel back to the host. The last line printed is the marker and the
// outcome as JSON.
const replWrapper = `def _cexec_run(src, marker, guest_dir, persistent, session):
    import sys, os, json, traceback, types
    if 'cexec' not in sys.modules or not getattr(sys.modules['cexec'], '_repl_stub', False):
        m = types.ModuleType('cexec')
        m._repl_stub = True
        class HostError(Exception):
            def __init__(self, message, type='HostError'):
                super().__init__(message)
                self.type = type
        class ToolError(HostError):
            pass
        class StateConflict(HostError):
            pass
        why = ('is not available: this sandbox runs programs in the msb server\'s Python REPL '
               '(sandbox-microsandbox server_exec = "repl"), which has no channel back to cexecd; '
               'use server_exec = "relay" for tool calls')
        def _host_call(method, params=None):
            raise HostError(method + ' ' + why)
        def call_tool(server, tool, arguments=None):
            raise ToolError('call_tool ' + why, 'ToolError')
        def result(obj):
            m._result = json.dumps(obj, separators=(',', ':'))
        def get_state(name, default=None):
            return _host_call('get_state')
        def load_state(name, default=None):
            return _host_call('load_state')
        def save_state(name, value, version=None):
            return _host_call('save_state')
        def checkpoint(step, context=None):
            return _host_call('checkpoint')
        def save_skill(name, description, code):
            return _host_call('save_skill')
        for f in (HostError, ToolError, StateConflict, _host_call, call_tool, result, get_state, load_state, save_state, checkpoint, save_skill):
            setattr(m, f.__name__, f)
        m.__all__ = ['HostError', 'StateConflict', 'ToolError', 'call_tool', 'checkpoint', 'get_state', 'load_state', 'result', 'save_skill', 'save_state']
        sys.modules['cexec'] = m
        for p in (guest_dir, '/workspace'):
            if p not in sys.path:
                sys.path.insert(0, p)
    m = sys.modules['cexec']
    m._result = None
    sessions = sys.__dict__.setdefault('_cexec_sessions', {})
    g = sessions.setdefault(session, {'__name__': '__main__'}) if persistent else {'__name__': '__main__'}
    out = {'exit_code': 0}
    try:
        if os.path.isdir('/workspace'):
            os.chdir('/workspace')
        exec(compile(src, '<program>', 'exec'), g)
    except SystemExit as e:
        c = e.code
        out['exit_code'] = c if isinstance(c, int) else (0 if c is None else 1)
    except BaseException as e:
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        out = {'exit_code': 1, 'error': {'type': type(e).__name__, 'message': str(e), 'traceback': ''.join(tb[:1] + tb[2:])}}
    sys.stdout.flush()
    sys.stderr.flush()
    if m._result is not None:
        out['result'] = json.loads(m._result)
    print(marker + json.dumps(out))
`

// replBox is a sandbox of a 0.2 server whose programs run in the server's
// Python REPL (server_exec = "repl").
type replBox struct {
	b        *serverBackend
	vmName   string
	guestDir string
	limits   sandbox.Limits
	broken   atomic.Bool
}

func (rb *replBox) name() string { return rb.vmName }

func (rb *replBox) alive() bool { return !rb.broken.Load() }

type replOutcome struct {
	ExitCode int             `json:"exit_code"`
	Result   json.RawMessage `json:"result"`
	Error    *struct {
		Type      string `json:"type"`
		Message   string `json:"message"`
		Traceback string `json:"traceback"`
	} `json:"error"`
}

// exec runs one program with sandbox.repl.run. Output comes back at the
// end, as lines. The REPL cannot be interrupted: a program that runs past
// its time limit keeps the REPL busy, so the sandbox is reported not OK.
func (rb *replBox) exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = rb.limits.Timeout
	}
	var mb [12]byte
	_, _ = rand.Read(mb[:])
	marker := "cexec-end-" + hex.EncodeToString(mb[:]) + " "
	// Every program of this server runs in its one interpreter: with fresh
	// globals a persistent request is an ordinary one.
	persistent := req.Persistent && !req.FreshGlobals
	args, _ := json.Marshal([]any{req.Code, marker, rb.guestDir, persistent, req.Session})
	code := fmt.Sprintf("exec(__import__('base64').b64decode('%s').decode()); _cexec_run(*__import__('json').loads(__import__('base64').b64decode('%s').decode()))",
		base64.StdEncoding.EncodeToString([]byte(replWrapper)), base64.StdEncoding.EncodeToString(args))
	secs := int64((timeout + time.Second - 1) / time.Second)
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	r, err := rb.b.rpc.repl(cctx, rb.vmName, code, secs)
	res := sandbox.ExecResult{Duration: time.Since(began)}
	if err != nil {
		rb.broken.Store(true)
		var se *ServerError
		switch {
		case errors.As(err, &se) && se.HTTPStatus == http.StatusInternalServerError && res.Duration >= timeout:
			// The portal's timeout comes back as the server's generic 500.
			res.ExitCode, res.TimedOut = 137, true
			res.Error = &sandbox.ExecError{Type: "Timeout", Message: fmt.Sprintf("the program ran longer than its %s limit; the REPL stays busy with it, so the sandbox is recycled", timeout)}
			return res, nil
		case ctx.Err() != nil:
			res.ExitCode = 137
			res.Error = &sandbox.ExecError{Type: "Killed", Message: "the execution was cancelled; the REPL cannot be interrupted, so the sandbox is recycled"}
			return res, nil
		}
		return res, err
	}
	var out replOutcome
	found := false
	var used int64
	for _, l := range r.Output {
		if l.Stream == "stdout" && strings.HasPrefix(l.Text, marker) {
			found = json.Unmarshal([]byte(l.Text[len(marker):]), &out) == nil
			continue
		}
		text := l.Text + "\n"
		if used+int64(len(text)) > rb.limits.OutputBytes {
			text = text[:rb.limits.OutputBytes-used]
			res.OutputTruncated = true
		}
		used += int64(len(text))
		if text == "" {
			continue
		}
		stream := sandbox.Stdout
		if l.Stream == "stderr" {
			stream = sandbox.Stderr
		}
		if err := host.Output(stream, []byte(text)); err != nil {
			return res, fmt.Errorf("deliver output: %w", err)
		}
	}
	if !found {
		rb.broken.Store(true)
		res.ExitCode = 137
		res.Error = &sandbox.ExecError{Type: "Killed", Message: "the program ended the server's REPL before reporting how it ended"}
		return res, nil
	}
	res.ExitCode, res.SandboxOK = out.ExitCode, true
	if len(out.Result) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, out.Result) == nil {
			res.Result = buf.Bytes()
		}
	}
	if out.Error != nil {
		res.Error = &sandbox.ExecError{Type: out.Error.Type, Message: out.Error.Message, Traceback: out.Error.Traceback}
	}
	return res, nil
}

// health runs a trivial statement in the REPL.
func (rb *replBox) health(ctx context.Context) error {
	if rb.broken.Load() {
		return errors.New("the REPL is busy with or was ended by an earlier program")
	}
	r, err := rb.b.rpc.repl(ctx, rb.vmName, "print('cexec-ok')", 10)
	if err != nil {
		return err
	}
	for _, l := range r.Output {
		if l.Text == "cexec-ok" {
			return nil
		}
	}
	return errors.New("the server's REPL did not answer")
}

func (rb *replBox) destroy(ctx context.Context) error {
	return rb.b.stop(ctx, rb.vmName)
}
