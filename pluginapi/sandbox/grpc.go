package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/internal/maxprocs"
	"github.com/cexec/cexec/pluginapi"
	commonv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/common/v1"
	sandboxv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/sandbox/v1"
)

// DefaultCallErrorType is the CallError type a failed host call gets when the
// host's error is not a *CallError.
const DefaultCallErrorType = "HostError"

// maxChunk bounds one OutputChunk message; larger writes are split so that a
// chatty program never hits gRPC's message size limit.
const maxChunk = 1 << 20

// GRPCPlugin is the go-plugin glue for sandbox backends. In a plugin, set
// Impl and pass it to Serve; in the host, register a zero GRPCPlugin and the
// value Dispense returns is a Sandbox that talks to the plugin.
//
// On the host side, Exec calls host.Output from one goroutine, in stream
// order, and host.Call from a goroutine per call, so a slow tool call never
// holds up output: Host implementations must be safe for concurrent use.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's backend; only the plugin side sets it.
	Impl Sandbox
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers Impl on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("sandbox plugin: GRPCPlugin.Impl is nil")
	}
	sandboxv1.RegisterSandboxServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a Sandbox backed by the plugin's gRPC connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	rpc := sandboxv1.NewSandboxClient(c)
	return &client{BaseClient: pluginapi.BaseClient{RPC: rpc}, rpc: rpc}, nil
}

// Serve runs impl as a sandbox plugin until the host stops it. Call it from
// the plugin's main. Unless GOMAXPROCS is set in the plugin's environment,
// it runs Go code on half of the CPUs (internal/maxprocs): a backend relays
// executions, and their sandboxes need the rest.
func Serve(impl Sandbox) {
	maxprocs.Set()
	pluginapi.Serve(pluginapi.KindSandbox, &GRPCPlugin{Impl: impl})
}

// client implements Sandbox over gRPC, on the host side.
type client struct {
	pluginapi.BaseClient
	rpc sandboxv1.SandboxClient
}

func (c *client) Capabilities(ctx context.Context) (Capabilities, error) {
	resp, err := c.rpc.Capabilities(ctx, &sandboxv1.CapabilitiesRequest{})
	if err != nil {
		return Capabilities{}, pluginapi.FromStatusContext(ctx, err)
	}
	return Capabilities{
		Isolation:             resp.GetIsolation(),
		Network:               resp.GetNetwork(),
		PersistentInterpreter: resp.GetPersistentInterpreter(),
		Available:             resp.GetAvailable(),
		UnavailableReason:     resp.GetUnavailableReason(),
		RunAs:                 resp.GetRunAs(),
		HostMounts:            resp.GetHostMounts(),
		SessionInterpreter:    resp.GetSessionInterpreter(),
	}, nil
}

func (c *client) Create(ctx context.Context, req CreateRequest) (pluginapi.Diagnostics, error) {
	in := &sandboxv1.CreateRequest{
		Id:     req.ID,
		Tenant: req.Tenant,
		Limits: &sandboxv1.Limits{
			MemoryBytes: req.Limits.MemoryBytes,
			Pids:        req.Limits.Pids,
			TimeoutMs:   timeoutMS(req.Limits.Timeout),
			OutputBytes: req.Limits.OutputBytes,
			TmpBytes:    req.Limits.TmpBytes,
			CpusMilli:   req.Limits.CPUsMilli,
			ShmBytes:    req.Limits.ShmBytes,
			FileBytes:   req.Limits.FileBytes,
		},
		Env:     req.Env,
		Network: &sandboxv1.NetworkPolicy{Enabled: req.Network},
	}
	if u := req.RunAs; u != nil {
		in.RunAs = &sandboxv1.HostUser{Uid: u.UID, Gid: u.GID}
	}
	for _, m := range req.Mounts {
		in.Mounts = append(in.Mounts, &sandboxv1.Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	resp, err := c.rpc.Create(ctx, in)
	if err != nil {
		return nil, pluginapi.FromStatusContext(ctx, err)
	}
	return pluginapi.DiagnosticsFromProto(resp.GetDiagnostics()), nil
}

func (c *client) Destroy(ctx context.Context, id string) error {
	_, err := c.rpc.Destroy(ctx, &sandboxv1.DestroyRequest{Id: id})
	return pluginapi.FromStatusContext(ctx, err)
}

func (c *client) List(ctx context.Context) ([]Status, error) {
	resp, err := c.rpc.List(ctx, &sandboxv1.ListRequest{})
	if err != nil {
		return nil, pluginapi.FromStatusContext(ctx, err)
	}
	var out []Status
	for _, s := range resp.GetSandboxes() {
		st := Status{
			ID:         s.GetId(),
			Tenant:     s.GetTenant(),
			State:      s.GetState(),
			Executions: s.GetExecutions(),
			RSSBytes:   s.GetRssBytes(),
		}
		if ms := s.GetCreatedUnixMs(); ms != 0 {
			st.Created = time.UnixMilli(ms)
		}
		out = append(out, st)
	}
	return out, nil
}

func (c *client) Health(ctx context.Context, id string) error {
	resp, err := c.rpc.Health(ctx, &sandboxv1.HealthRequest{Id: id})
	if err != nil {
		return pluginapi.FromStatusContext(ctx, err)
	}
	if !resp.GetOk() {
		if resp.GetDetail() == "" {
			return fmt.Errorf("sandbox %s is unhealthy", id)
		}
		return errors.New(resp.GetDetail())
	}
	return nil
}

// Exec runs the program through the plugin's Exec stream: it sends ExecStart,
// relays output chunks to host.Output, answers host calls with host.Call
// (concurrently) and returns the final result. Cancelling ctx cancels the
// stream, which makes the plugin kill the program.
func (c *client) Exec(ctx context.Context, req ExecRequest, host Host) (ExecResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	var calls sync.WaitGroup
	// Cancel before waiting: a call still running must see ctx done.
	defer func() {
		cancel()
		calls.Wait()
	}()

	stream, err := c.rpc.Exec(ctx)
	if err != nil {
		return ExecResult{}, pluginapi.FromStatusContext(ctx, err)
	}
	var sendMu sync.Mutex
	send := func(m *sandboxv1.ExecInput) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}

	start := &sandboxv1.ExecStart{
		SandboxId:    req.SandboxID,
		Code:         req.Code,
		TimeoutMs:    timeoutMS(req.Timeout),
		Persistent:   req.Persistent,
		Session:      req.Session,
		HostToken:    req.HostToken,
		FreshGlobals: req.FreshGlobals,
	}
	// A failed Send means the stream is broken; Recv below reports why.
	_ = send(&sandboxv1.ExecInput{Msg: &sandboxv1.ExecInput_Start{Start: start}})

	for {
		out, err := stream.Recv()
		if err == io.EOF {
			return ExecResult{}, errors.New("sandbox exec: plugin ended the stream without a result")
		}
		if err != nil {
			// Once the caller cancelled, the plugin's own error (often a
			// host call failing with "context canceled") is a consequence.
			if ctx.Err() != nil {
				return ExecResult{}, ctx.Err()
			}
			return ExecResult{}, pluginapi.FromStatusContext(ctx, err)
		}
		switch m := out.GetMsg().(type) {
		case *sandboxv1.ExecOutput_Output:
			if err := host.Output(streamFromProto(m.Output.GetStream()), m.Output.GetData()); err != nil {
				return ExecResult{}, fmt.Errorf("sandbox exec: deliver output: %w", err)
			}
		case *sandboxv1.ExecOutput_Call:
			call := m.Call
			calls.Add(1)
			go func() {
				defer calls.Done()
				reply := &sandboxv1.HostReply{CallId: call.GetCallId()}
				result, err := host.Call(ctx, call.GetMethod(), call.GetParamsJson())
				if ctx.Err() != nil {
					// The stream is being cancelled: the plugin must see its
					// ctx done, not a reply saying "context canceled".
					return
				}
				if err != nil {
					reply.ErrorType, reply.Error = DefaultCallErrorType, err.Error()
					var ce *CallError
					if errors.As(err, &ce) {
						reply.ErrorType, reply.Error = ce.Type, ce.Message
						if reply.ErrorType == "" {
							reply.ErrorType = DefaultCallErrorType
						}
					}
				} else {
					reply.ResultJson = result
				}
				// A failed Send means the stream is broken; the receive
				// loop reports why.
				_ = send(&sandboxv1.ExecInput{Msg: &sandboxv1.ExecInput_Reply{Reply: reply}})
			}()
		case *sandboxv1.ExecOutput_Result:
			return resultFromProto(m.Result), nil
		default:
			return ExecResult{}, fmt.Errorf("sandbox exec: unexpected message %T from plugin", m)
		}
	}
}

// server exposes a Sandbox on the plugin's gRPC server.
type server struct {
	sandboxv1.UnimplementedSandboxServer
	impl Sandbox
}

func (s *server) Info(ctx context.Context, _ *commonv1.InfoRequest) (*commonv1.PluginInfo, error) {
	return pluginapi.HandleInfo(ctx, s.impl)
}

func (s *server) Configure(ctx context.Context, req *commonv1.ConfigureRequest) (*commonv1.ConfigureResponse, error) {
	return pluginapi.HandleConfigure(ctx, s.impl, req)
}

func (s *server) Capabilities(ctx context.Context, _ *sandboxv1.CapabilitiesRequest) (*sandboxv1.CapabilitiesResponse, error) {
	c, err := s.impl.Capabilities(ctx)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &sandboxv1.CapabilitiesResponse{
		Isolation:             c.Isolation,
		Network:               c.Network,
		PersistentInterpreter: c.PersistentInterpreter,
		Available:             c.Available,
		UnavailableReason:     c.UnavailableReason,
		RunAs:                 c.RunAs,
		HostMounts:            c.HostMounts,
		SessionInterpreter:    c.SessionInterpreter,
	}, nil
}

func (s *server) Create(ctx context.Context, in *sandboxv1.CreateRequest) (*sandboxv1.CreateResponse, error) {
	l := in.GetLimits()
	req := CreateRequest{
		ID:     in.GetId(),
		Tenant: in.GetTenant(),
		Limits: Limits{
			MemoryBytes: l.GetMemoryBytes(),
			Pids:        l.GetPids(),
			Timeout:     time.Duration(l.GetTimeoutMs()) * time.Millisecond,
			OutputBytes: l.GetOutputBytes(),
			TmpBytes:    l.GetTmpBytes(),
			CPUsMilli:   l.GetCpusMilli(),
			ShmBytes:    l.GetShmBytes(),
			FileBytes:   l.GetFileBytes(),
		},
		Env:     in.GetEnv(),
		Network: in.GetNetwork().GetEnabled(),
	}
	if u := in.GetRunAs(); u != nil {
		req.RunAs = &HostUser{UID: u.GetUid(), GID: u.GetGid()}
	}
	for _, m := range in.GetMounts() {
		req.Mounts = append(req.Mounts, Mount{Source: m.GetSource(), Target: m.GetTarget(), ReadOnly: m.GetReadOnly()})
	}
	diags, err := s.impl.Create(ctx, req)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &sandboxv1.CreateResponse{Id: req.ID, Diagnostics: pluginapi.DiagnosticsToProto(diags)}, nil
}

func (s *server) Destroy(ctx context.Context, in *sandboxv1.DestroyRequest) (*sandboxv1.DestroyResponse, error) {
	if err := s.impl.Destroy(ctx, in.GetId()); err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	return &sandboxv1.DestroyResponse{}, nil
}

func (s *server) List(ctx context.Context, _ *sandboxv1.ListRequest) (*sandboxv1.ListResponse, error) {
	list, err := s.impl.List(ctx)
	if err != nil {
		return nil, pluginapi.ToStatus(err)
	}
	out := &sandboxv1.ListResponse{}
	for _, st := range list {
		ps := &sandboxv1.SandboxStatus{
			Id:         st.ID,
			Tenant:     st.Tenant,
			State:      st.State,
			Executions: st.Executions,
			RssBytes:   st.RSSBytes,
		}
		if !st.Created.IsZero() {
			ps.CreatedUnixMs = st.Created.UnixMilli()
		}
		out.Sandboxes = append(out.Sandboxes, ps)
	}
	return out, nil
}

// Health reports a plain error from the backend as ok=false with the error as
// detail; sentinel errors (ErrNotFound, ErrUnimplemented, ...) travel as
// status codes so the host can tell "unhealthy" from "no such sandbox".
func (s *server) Health(ctx context.Context, in *sandboxv1.HealthRequest) (*sandboxv1.HealthResponse, error) {
	err := s.impl.Health(ctx, in.GetId())
	if err == nil {
		return &sandboxv1.HealthResponse{Ok: true}, nil
	}
	if st := pluginapi.ToStatus(err); status.Code(st) != codes.Unknown {
		return nil, st
	}
	return &sandboxv1.HealthResponse{Ok: false, Detail: err.Error()}, nil
}

// Exec reads ExecStart, runs the backend's Exec with a Host that speaks over
// the stream, and ends the stream with the ExecResult. The backend's ctx is
// done when the host cancels the stream or sends Cancel.
func (s *server) Exec(stream grpc.BidiStreamingServer[sandboxv1.ExecInput, sandboxv1.ExecOutput]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Errorf(codes.InvalidArgument, "exec: first message must be ExecStart, got %T", first.GetMsg())
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	h := &streamHost{stream: stream, pending: map[string]chan *sandboxv1.HostReply{}, closed: make(chan struct{})}
	go h.receive(cancel)

	res, err := s.impl.Exec(ctx, ExecRequest{
		SandboxID:    start.GetSandboxId(),
		Code:         start.GetCode(),
		Timeout:      time.Duration(start.GetTimeoutMs()) * time.Millisecond,
		Persistent:   start.GetPersistent(),
		Session:      start.GetSession(),
		HostToken:    start.GetHostToken(),
		FreshGlobals: start.GetFreshGlobals(),
	}, h)
	if err != nil {
		return pluginapi.ToStatus(err)
	}
	if err := h.send(&sandboxv1.ExecOutput{Msg: &sandboxv1.ExecOutput_Result{Result: resultToProto(res)}}); err != nil {
		return fmt.Errorf("exec: send result: %w", err)
	}
	return nil
}

// streamHost is the Host a backend's Exec gets in the plugin: output and
// calls go out on the stream, replies come back by call id.
type streamHost struct {
	stream grpc.BidiStreamingServer[sandboxv1.ExecInput, sandboxv1.ExecOutput]
	sendMu sync.Mutex // grpc streams do not allow concurrent Send
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan *sandboxv1.HostReply
	closed  chan struct{} // closed when the host stops sending
	err     error         // why it stopped; set before closed is closed
}

func (h *streamHost) send(m *sandboxv1.ExecOutput) error {
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	return h.stream.Send(m)
}

// receive routes the host's replies to waiting calls until the stream ends,
// and cancels the execution when the host sends Cancel.
func (h *streamHost) receive(cancel context.CancelFunc) {
	for {
		in, err := h.stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("host closed the exec stream")
			}
			h.mu.Lock()
			h.err = err
			close(h.closed)
			h.mu.Unlock()
			return
		}
		switch m := in.GetMsg().(type) {
		case *sandboxv1.ExecInput_Reply:
			h.mu.Lock()
			ch, ok := h.pending[m.Reply.GetCallId()]
			delete(h.pending, m.Reply.GetCallId())
			h.mu.Unlock()
			if ok {
				ch <- m.Reply
			}
		case *sandboxv1.ExecInput_Cancel:
			cancel()
		}
	}
}

// Output sends data as one or more OutputChunks.
func (h *streamHost) Output(s Stream, data []byte) error {
	ps := streamToProto(s)
	for {
		n := min(len(data), maxChunk)
		if err := h.send(&sandboxv1.ExecOutput{Msg: &sandboxv1.ExecOutput_Output{
			Output: &sandboxv1.OutputChunk{Stream: ps, Data: data[:n]},
		}}); err != nil {
			return fmt.Errorf("send output: %w", err)
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}

// Call sends a HostCall and waits for its reply, ctx, or the end of the
// stream. A reply with an error becomes a *CallError.
func (h *streamHost) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	id := strconv.FormatUint(h.nextID.Add(1), 10)
	ch := make(chan *sandboxv1.HostReply, 1)
	h.mu.Lock()
	select {
	case <-h.closed:
		h.mu.Unlock()
		return nil, fmt.Errorf("host call %s: %w", method, h.err)
	default:
	}
	h.pending[id] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.pending, id)
		h.mu.Unlock()
	}()

	err := h.send(&sandboxv1.ExecOutput{Msg: &sandboxv1.ExecOutput_Call{
		Call: &sandboxv1.HostCall{CallId: id, Method: method, ParamsJson: params},
	}})
	if err != nil {
		return nil, fmt.Errorf("host call %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.GetError() != "" || r.GetErrorType() != "" {
			t := r.GetErrorType()
			if t == "" {
				t = DefaultCallErrorType
			}
			return nil, &CallError{Type: t, Message: r.GetError()}
		}
		return r.GetResultJson(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-h.stream.Context().Done():
		return nil, h.stream.Context().Err()
	case <-h.closed:
		return nil, fmt.Errorf("host call %s: %w", method, h.err)
	}
}

// timeoutMS converts a timeout to whole milliseconds, rounding up so that a
// tiny positive timeout does not turn into 0 ("use the default").
func timeoutMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func streamToProto(s Stream) sandboxv1.Stream {
	switch s {
	case Stdout:
		return sandboxv1.Stream_STREAM_STDOUT
	case Stderr:
		return sandboxv1.Stream_STREAM_STDERR
	}
	return sandboxv1.Stream_STREAM_UNSPECIFIED
}

// streamFromProto maps an unspecified stream to Stderr: output of unknown
// origin is diagnostic, not the program's answer.
func streamFromProto(s sandboxv1.Stream) Stream {
	if s == sandboxv1.Stream_STREAM_STDOUT {
		return Stdout
	}
	return Stderr
}

func resultToProto(r ExecResult) *sandboxv1.ExecResult {
	out := &sandboxv1.ExecResult{
		ExitCode:        int32(r.ExitCode),
		ResultJson:      r.Result,
		DurationMs:      r.Duration.Milliseconds(),
		Usage:           &sandboxv1.Usage{CpuMs: r.Usage.CPU.Milliseconds(), MaxRssBytes: r.Usage.MaxRSSBytes},
		OutputTruncated: r.OutputTruncated,
		TimedOut:        r.TimedOut,
		SandboxOk:       r.SandboxOK,
		SessionLost:     r.SessionLost,
	}
	if r.Error != nil {
		out.Error = &sandboxv1.ExecError{Type: r.Error.Type, Message: r.Error.Message, Traceback: r.Error.Traceback}
	}
	return out
}

func resultFromProto(r *sandboxv1.ExecResult) ExecResult {
	out := ExecResult{
		ExitCode:        int(r.GetExitCode()),
		Result:          r.GetResultJson(),
		Duration:        time.Duration(r.GetDurationMs()) * time.Millisecond,
		Usage:           Usage{CPU: time.Duration(r.GetUsage().GetCpuMs()) * time.Millisecond, MaxRSSBytes: r.GetUsage().GetMaxRssBytes()},
		OutputTruncated: r.GetOutputTruncated(),
		TimedOut:        r.GetTimedOut(),
		SandboxOK:       r.GetSandboxOk(),
		SessionLost:     r.GetSessionLost(),
	}
	if e := r.GetError(); e != nil {
		out.Error = &ExecError{Type: e.GetType(), Message: e.GetMessage(), Traceback: e.GetTraceback()}
	}
	return out
}
