package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	sandboxv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/sandbox/v1"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// wait bounds every wait in these tests so that a broken adapter fails the
// test instead of hanging it.
const wait = 10 * time.Second

// backend is a sandbox whose Exec runs the program given by the test, and
// whose other calls record their request and return the test's answers.
type backend struct {
	run func(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error)

	mu      sync.Mutex
	execReq sandbox.ExecRequest
	create  sandbox.CreateRequest
	caps    sandbox.Capabilities
	list    []sandbox.Status
	health  map[string]error
	err     error
}

func (b *backend) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "fake", Kind: pluginapi.KindSandbox, Version: "0.1.0", APIVersions: []string{"v1"}}, nil
}

func (b *backend) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (b *backend) Capabilities(context.Context) (sandbox.Capabilities, error) { return b.caps, b.err }

func (b *backend) Create(_ context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.create = req
	if req.Limits.MemoryBytes < 0 {
		return pluginapi.Diagnostics{pluginapi.Errorf("limits.memory", "negative memory", "")}, nil
	}
	return nil, b.err
}

func (b *backend) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	b.mu.Lock()
	b.execReq = req
	b.mu.Unlock()
	return b.run(ctx, req, host)
}

func (b *backend) Destroy(_ context.Context, id string) error {
	if id != "sb1" {
		return fmt.Errorf("sandbox %s: %w", id, pluginapi.ErrNotFound)
	}
	return nil
}

func (b *backend) List(context.Context) ([]sandbox.Status, error) { return b.list, b.err }

func (b *backend) Health(_ context.Context, id string) error { return b.health[id] }

func TestExecOutputAndResult(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 160*1024) // 2.5 MiB: split into chunks
	want := sandbox.ExecResult{
		ExitCode:        3,
		Result:          json.RawMessage(`{"n":42}`),
		Error:           &sandbox.ExecError{Type: "ValueError", Message: "bad", Traceback: "Traceback ..."},
		Duration:        1500 * time.Millisecond,
		Usage:           sandbox.Usage{CPU: 250 * time.Millisecond, MaxRSSBytes: 64 << 20},
		OutputTruncated: true,
		TimedOut:        true,
		SandboxOK:       true,
		SessionLost:     true,
	}
	b := &backend{run: func(_ context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
		for _, o := range []struct {
			s sandbox.Stream
			d []byte
		}{{sandbox.Stdout, []byte("hello ")}, {sandbox.Stderr, []byte("warning\n")}, {sandbox.Stdout, []byte("world\n")}, {sandbox.Stdout, big}} {
			if err := host.Output(o.s, o.d); err != nil {
				return sandbox.ExecResult{}, err
			}
		}
		return want, nil
	}}
	sb := plugintest.Sandbox(t, b)
	host := &plugintest.Host{}
	req := sandbox.ExecRequest{SandboxID: "sb1", Code: "print('hello world')", Timeout: 2500 * time.Microsecond, Persistent: true, Session: "s1", HostToken: "tok", FreshGlobals: true}
	got, err := sb.Exec(t.Context(), req, host)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Exec = %#v, want %#v", got, want)
	}
	if host.Stdout() != "hello world\n"+string(big) {
		t.Errorf("stdout has %d bytes, want %d", len(host.Stdout()), len("hello world\n")+len(big))
	}
	if host.Stderr() != "warning\n" {
		t.Errorf("stderr = %q", host.Stderr())
	}
	// Timeouts travel as whole milliseconds, rounded up so they never
	// become 0 ("use the default").
	wantReq := req
	wantReq.Timeout = 3 * time.Millisecond
	if b.execReq != wantReq {
		t.Errorf("plugin got %#v, want %#v", b.execReq, wantReq)
	}
}

func TestExecHostCalls(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
		want     string
		wantType string
		wantMsg  string
	}{
		{
			name: "result",
			answer: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"method":"` + method + `","echo":` + string(params) + `}`), nil
			},
			want: `{"method":"call_tool","echo":{"server":"fs","tool":"read","arguments":{"path":"/a"}}}`,
		},
		{
			name: "call error",
			answer: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, fmt.Errorf("upstream: %w", &sandbox.CallError{Type: "ToolError", Message: "file not found"})
			},
			wantType: "ToolError", wantMsg: "file not found",
		},
		{
			name: "plain error",
			answer: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, errors.New("vault locked")
			},
			wantType: "HostError", wantMsg: "vault locked",
		},
		{
			name: "call error without type",
			answer: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return nil, &sandbox.CallError{Message: "nope"}
			},
			wantType: "HostError", wantMsg: "nope",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var callErr error
			b := &backend{run: func(ctx context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
				res, err := host.Call(ctx, "call_tool", json.RawMessage(`{"server":"fs","tool":"read","arguments":{"path":"/a"}}`))
				callErr = err
				return sandbox.ExecResult{Result: res, SandboxOK: true}, nil
			}}
			sb := plugintest.Sandbox(t, b)
			host := &plugintest.Host{OnCall: tt.answer}
			got, err := sb.Exec(t.Context(), sandbox.ExecRequest{SandboxID: "sb1", Code: "x"}, host)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantType == "" {
				if callErr != nil || string(got.Result) != tt.want {
					t.Errorf("call result = %s, %v; want %s", got.Result, callErr, tt.want)
				}
			} else {
				var ce *sandbox.CallError
				if !errors.As(callErr, &ce) || ce.Type != tt.wantType || ce.Message != tt.wantMsg {
					t.Errorf("call error = %#v, want CallError{%s, %s}", callErr, tt.wantType, tt.wantMsg)
				}
			}
			if calls := host.Calls(); len(calls) != 1 || calls[0].Method != "call_tool" {
				t.Errorf("host saw calls %v", calls)
			}
		})
	}
}

// TestExecConcurrentCalls has a slow host call that only returns once output
// sent after it has arrived, and many calls answered out of order: replies
// must reach the right callers and output must not wait for calls.
func TestExecConcurrentCalls(t *testing.T) {
	const n = 20
	b := &backend{run: func(ctx context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
		var wg sync.WaitGroup
		errs := make(chan error, n+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := host.Call(ctx, "slow", nil); err != nil {
				errs <- fmt.Errorf("slow call: %w", err)
			}
		}()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := host.Call(ctx, "echo", json.RawMessage(strconv.Itoa(i)))
				if err != nil || string(res) != strconv.Itoa(i*10) {
					errs <- fmt.Errorf("call %d = %s, %v", i, res, err)
				}
			}()
		}
		if err := host.Output(sandbox.Stdout, []byte("after")); err != nil {
			return sandbox.ExecResult{}, err
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return sandbox.ExecResult{}, err
		}
		return sandbox.ExecResult{SandboxOK: true}, nil
	}}
	sb := plugintest.Sandbox(t, b)
	outputSeen := make(chan struct{})
	host := &signalHost{
		Host: plugintest.Host{OnCall: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			if method == "slow" {
				select {
				case <-outputSeen:
					return json.RawMessage(`true`), nil
				case <-time.After(wait):
					return nil, errors.New("output was held up behind a slow host call")
				}
			}
			i, _ := strconv.Atoi(string(params))
			time.Sleep(time.Duration(n-i) * time.Millisecond) // answer in reverse order
			return json.RawMessage(strconv.Itoa(i * 10)), nil
		}},
		seen: outputSeen,
	}
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{SandboxID: "sb1"}, host)
	if err != nil {
		t.Fatal(err)
	}
	if !res.SandboxOK || host.Stdout() != "after" || len(host.Calls()) != n+1 {
		t.Errorf("result %#v, stdout %q, %d calls", res, host.Stdout(), len(host.Calls()))
	}
}

// signalHost closes seen on its first output.
type signalHost struct {
	plugintest.Host
	seen chan struct{}
	once sync.Once
}

func (h *signalHost) Output(s sandbox.Stream, data []byte) error {
	err := h.Host.Output(s, data)
	h.once.Do(func() { close(h.seen) })
	return err
}

// TestExecCancel cancels the host's ctx while the program runs, once while
// it computes and once while it waits for a host call: the host gets
// context.Canceled, and the plugin sees its ctx done (where it must kill the
// program).
func TestExecCancel(t *testing.T) {
	tests := []struct {
		name   string
		inCall bool
	}{
		{name: "while running"},
		{name: "while in a host call", inCall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pluginSawDone := make(chan error, 1)
			hostCallSawDone := make(chan error, 1)
			b := &backend{run: func(ctx context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
				if err := host.Output(sandbox.Stdout, []byte("started")); err != nil {
					return sandbox.ExecResult{}, err
				}
				if tt.inCall {
					_, err := host.Call(ctx, "call_tool", json.RawMessage(`{}`))
					pluginSawDone <- err
					return sandbox.ExecResult{}, err
				}
				select {
				case <-ctx.Done():
					pluginSawDone <- ctx.Err()
					return sandbox.ExecResult{}, ctx.Err()
				case <-time.After(wait):
					pluginSawDone <- errors.New("ctx never done")
					return sandbox.ExecResult{}, errors.New("not cancelled")
				}
			}}
			sb := plugintest.Sandbox(t, b)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			started := make(chan struct{})
			host := &signalHost{seen: started, Host: plugintest.Host{
				OnCall: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
					cancel()
					<-ctx.Done()
					hostCallSawDone <- ctx.Err()
					return nil, ctx.Err()
				},
			}}
			if !tt.inCall {
				go func() { <-started; cancel() }()
			}
			_, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: "sb1"}, host)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Exec after cancel = %v, want context.Canceled", err)
			}
			select {
			case err := <-pluginSawDone:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("plugin side saw %v, want context.Canceled", err)
				}
			case <-time.After(wait):
				t.Fatal("plugin side never saw the cancellation")
			}
			if tt.inCall {
				// Exec waits for host calls it started, so this is ready.
				select {
				case err := <-hostCallSawDone:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("host call ctx: %v", err)
					}
				default:
					t.Error("Exec returned before its host call finished")
				}
			}
		})
	}
}

func TestExecErrors(t *testing.T) {
	tests := []struct {
		name     string
		pluginFn func(context.Context, sandbox.ExecRequest, sandbox.Host) (sandbox.ExecResult, error)
		host     sandbox.Host
		want     error
		wantMsg  string
	}{
		{
			name: "plugin error mapped",
			pluginFn: func(_ context.Context, req sandbox.ExecRequest, _ sandbox.Host) (sandbox.ExecResult, error) {
				return sandbox.ExecResult{}, fmt.Errorf("sandbox %s: %w", req.SandboxID, pluginapi.ErrNotFound)
			},
			host: &plugintest.Host{}, want: pluginapi.ErrNotFound, wantMsg: "sandbox sb1: not found",
		},
		{
			name: "host output failure ends exec",
			pluginFn: func(ctx context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
				_ = host.Output(sandbox.Stdout, []byte("x"))
				<-ctx.Done() // the host gave up: the plugin sees it
				return sandbox.ExecResult{}, ctx.Err()
			},
			host: failingHost{}, want: errOutput, wantMsg: "sandbox exec: deliver output: client went away",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := plugintest.Sandbox(t, &backend{run: tt.pluginFn})
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			_, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: "sb1"}, tt.host)
			if !errors.Is(err, tt.want) || err.Error() != tt.wantMsg {
				t.Errorf("Exec = %v, want %v with message %q", err, tt.want, tt.wantMsg)
			}
		})
	}
}

var errOutput = errors.New("client went away")

type failingHost struct{}

func (failingHost) Output(sandbox.Stream, []byte) error { return errOutput }

func (failingHost) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errOutput
}

// TestExecRawStream drives the plugin side with a bare gRPC client, as a
// host in another language would: ExecStart must come first, and Cancel
// stops the program while the result still arrives.
func TestExecRawStream(t *testing.T) {
	b := &backend{run: func(ctx context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
		_ = host.Output(sandbox.Stdout, []byte("running"))
		select {
		case <-ctx.Done():
			return sandbox.ExecResult{Error: &sandbox.ExecError{Type: "Killed", Message: "cancelled by host"}}, nil
		case <-time.After(wait):
			return sandbox.ExecResult{}, errors.New("never cancelled")
		}
	}}
	c, srv := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{"sandbox": &sandbox.GRPCPlugin{Impl: b}})
	t.Cleanup(func() { srv.Stop(); _ = c.Close() })
	rpc := sandboxv1.NewSandboxClient(c.Conn)

	t.Run("start first", func(t *testing.T) {
		stream, err := rpc.Exec(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&sandboxv1.ExecInput{Msg: &sandboxv1.ExecInput_Cancel{Cancel: &sandboxv1.Cancel{}}})
		_, err = stream.Recv()
		if !errors.Is(pluginapi.FromStatus(err), pluginapi.ErrInvalidArgument) {
			t.Errorf("Exec without ExecStart = %v, want InvalidArgument", err)
		}
	})
	t.Run("cancel message", func(t *testing.T) {
		stream, err := rpc.Exec(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&sandboxv1.ExecInput{Msg: &sandboxv1.ExecInput_Start{Start: &sandboxv1.ExecStart{SandboxId: "sb1"}}}); err != nil {
			t.Fatal(err)
		}
		out, err := stream.Recv()
		if err != nil || string(out.GetOutput().GetData()) != "running" {
			t.Fatalf("first message = %v, %v", out, err)
		}
		if err := stream.Send(&sandboxv1.ExecInput{Msg: &sandboxv1.ExecInput_Cancel{Cancel: &sandboxv1.Cancel{}}}); err != nil {
			t.Fatal(err)
		}
		out, err = stream.Recv()
		if err != nil || out.GetResult().GetError().GetType() != "Killed" {
			t.Fatalf("after Cancel = %v, %v; want a Killed result", out, err)
		}
		if _, err := stream.Recv(); err != io.EOF {
			t.Errorf("stream after result: %v, want EOF", err)
		}
	})
}

func TestUnaryCalls(t *testing.T) {
	created := time.UnixMilli(1_700_000_000_123)
	b := &backend{
		caps: sandbox.Capabilities{Isolation: "namespaces", Network: true, PersistentInterpreter: true, UnavailableReason: "no userns", RunAs: true, HostMounts: true, SessionInterpreter: true},
		list: []sandbox.Status{
			{ID: "sb1", Tenant: "t1", State: "idle", Created: created, Executions: 3, RSSBytes: 1 << 20},
			{ID: "sb2", State: "creating"},
		},
		health: map[string]error{
			"sick":    errors.New("interpreter does not answer"),
			"gone":    fmt.Errorf("sandbox gone: %w", pluginapi.ErrNotFound),
			"unknown": pluginapi.ErrUnimplemented,
		},
	}
	sb := plugintest.Sandbox(t, b)
	ctx := t.Context()
	plugintest.CheckInfo(t, sb, pluginapi.KindSandbox)

	caps, err := sb.Capabilities(ctx)
	if err != nil || caps != b.caps {
		t.Errorf("Capabilities = %#v, %v; want %#v", caps, err, b.caps)
	}

	creq := sandbox.CreateRequest{
		ID: "sb1", Tenant: "t1",
		Mounts:  []sandbox.Mount{{Source: "/srv/ws", Target: "/workspace"}, {Source: "/srv/skills", Target: "/skills", ReadOnly: true}},
		Limits:  sandbox.Limits{MemoryBytes: 256 << 20, Pids: 64, Timeout: 30 * time.Second, OutputBytes: 1 << 20, TmpBytes: 64 << 20, CPUsMilli: 1000, ShmBytes: 32 << 20, FileBytes: 16 << 20},
		Env:     map[string]string{"LANG": "C.UTF-8"},
		Network: true,
		RunAs:   &sandbox.HostUser{UID: 200001, GID: 200001},
	}
	if diags, err := sb.Create(ctx, creq); err != nil || diags != nil {
		t.Errorf("Create = %v, %v", diags, err)
	}
	if !reflect.DeepEqual(b.create, creq) {
		t.Errorf("plugin got %#v, want %#v", b.create, creq)
	}
	diags, err := sb.Create(ctx, sandbox.CreateRequest{ID: "bad", Limits: sandbox.Limits{MemoryBytes: -1}})
	if err != nil || len(diags) != 1 || diags[0].Attribute != "limits.memory" {
		t.Errorf("Create with bad limits = %#v, %v", diags, err)
	}

	list, err := sb.List(ctx)
	if err != nil || !reflect.DeepEqual(list, b.list) {
		t.Errorf("List = %#v, %v; want %#v", list, err, b.list)
	}

	if err := sb.Destroy(ctx, "sb1"); err != nil {
		t.Errorf("Destroy(sb1) = %v", err)
	}
	if err := sb.Destroy(ctx, "nope"); !errors.Is(err, pluginapi.ErrNotFound) || err.Error() != "sandbox nope: not found" {
		t.Errorf("Destroy(nope) = %v, want ErrNotFound", err)
	}

	healthTests := []struct {
		id      string
		want    error
		wantMsg string
	}{
		{"sb1", nil, ""},
		{"sick", nil, "interpreter does not answer"},
		{"gone", pluginapi.ErrNotFound, "sandbox gone: not found"},
		{"unknown", pluginapi.ErrUnimplemented, "not implemented by this plugin"},
	}
	for _, ht := range healthTests {
		err := sb.Health(ctx, ht.id)
		switch {
		case ht.wantMsg == "" && err != nil:
			t.Errorf("Health(%s) = %v, want nil", ht.id, err)
		case ht.wantMsg != "" && (err == nil || err.Error() != ht.wantMsg):
			t.Errorf("Health(%s) = %v, want %q", ht.id, err, ht.wantMsg)
		case ht.want != nil && !errors.Is(err, ht.want):
			t.Errorf("Health(%s) = %v, want errors.Is %v", ht.id, err, ht.want)
		}
	}

	b.err = fmt.Errorf("kvm missing: %w", pluginapi.ErrUnavailable)
	if _, err := sb.Capabilities(ctx); !errors.Is(err, pluginapi.ErrUnavailable) {
		t.Errorf("Capabilities error = %v, want ErrUnavailable", err)
	}
}

// BenchmarkExec measures one whole Exec stream (start, one output chunk,
// result) through in-process gRPC.
func BenchmarkExec(b *testing.B) {
	sb := plugintest.Sandbox(b, &backend{run: func(_ context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{SandboxOK: true}, host.Output(sandbox.Stdout, []byte("ok\n"))
	}})
	host := &plugintest.Host{}
	for b.Loop() {
		if _, err := sb.Exec(b.Context(), sandbox.ExecRequest{SandboxID: "sb1"}, host); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostCall measures the round trip of one host call (plugin ->
// host -> plugin) inside a running Exec.
func BenchmarkHostCall(b *testing.B) {
	sb := plugintest.Sandbox(b, &backend{run: func(ctx context.Context, _ sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
		for range b.N {
			if _, err := host.Call(ctx, "call_tool", json.RawMessage(`{"server":"fs","tool":"read"}`)); err != nil {
				return sandbox.ExecResult{}, err
			}
		}
		return sandbox.ExecResult{SandboxOK: true}, nil
	}})
	host := &plugintest.Host{OnCall: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":"x"}`), nil
	}}
	if _, err := sb.Exec(b.Context(), sandbox.ExecRequest{SandboxID: "sb1"}, host); err != nil {
		b.Fatal(err)
	}
}
