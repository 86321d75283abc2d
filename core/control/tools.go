package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/core/catalog"
)

// Tools is the view of the tool catalog the server needs; *catalog.Catalog
// implements it (core wraps Refresh to re-read the shared skills too).
type Tools interface {
	// Servers lists the upstream servers in config order.
	Servers() []catalog.ServerStatus
	// Tools lists every tool, upstream ones first, then local tools.
	Tools() []catalog.Tool
	Tool(server, name string) (catalog.Tool, bool)
	// StubSource is a tool's Python source by id.
	StubSource(id string) ([]byte, bool)
	// Refresh lists one server's tools again ("" for all).
	Refresh(ctx context.Context, server string) error
}

// TransportLocal is the transport reported for packages of local tools.
const TransportLocal = "local"

// Server states reported in ServerInfo.State.
const (
	ServerOK           = "ok"
	ServerConnecting   = "connecting"
	ServerReconnecting = "reconnecting"
	ServerFailed       = "failed"
	ServerClosed       = "closed"
)

func serverState(s catalog.State) string {
	switch s {
	case catalog.StateReady:
		return ServerOK
	case catalog.StateConnecting:
		return ServerConnecting
	case catalog.StateReconnecting:
		return ServerReconnecting
	case catalog.StateBackoff:
		return ServerFailed
	}
	return string(s)
}

// ListServers reports every upstream server, then every package of local
// tools (transport "local").
func (s *Server) ListServers(context.Context, *cexecv1.ListServersRequest) (*cexecv1.ListServersResponse, error) {
	if s.d.Tools == nil {
		return nil, status.Error(codes.Unimplemented, "list servers: no tool catalog wired into cexecd")
	}
	var out []*cexecv1.ServerInfo
	for _, st := range s.d.Tools.Servers() {
		info := &cexecv1.ServerInfo{
			Name: st.Name, Transport: st.Transport, State: serverState(st.State), ProtocolVersion: st.ProtocolVersion,
			ServerName: st.ServerName, ServerVersion: st.ServerVersion, Tools: int32(st.Tools), Pid: int32(st.PID),
			Restarts: int32(st.Restarts), LastError: st.LastError, Optional: st.Optional, Scope: st.Scope,
			StrayStdoutLines: int32(st.StrayLines), LastStrayStdoutLine: st.LastStrayLine,
		}
		for _, in := range st.Instances {
			info.Instances = append(info.Instances, &cexecv1.ServerInstance{
				Tenant: in.Tenant, State: serverState(in.State), Pid: int32(in.PID),
				StartedUnixMs: in.StartedAt.UnixMilli(), LastUsedUnixMs: in.LastUsed.UnixMilli(),
				InFlight: int32(in.InFlight), Restarts: int32(in.Restarts), LastError: in.LastError,
				StrayStdoutLines: int32(in.StrayLines), LastStrayStdoutLine: in.LastStrayLine,
			})
		}
		out = append(out, info)
	}
	local := map[string]*cexecv1.ServerInfo{}
	for _, t := range s.d.Tools.Tools() {
		if t.Local == nil {
			continue
		}
		info := local[t.Server]
		if info == nil {
			info = &cexecv1.ServerInfo{Name: t.Server, Transport: TransportLocal, State: ServerOK}
			local[t.Server] = info
			out = append(out, info)
		}
		info.Tools++
	}
	return &cexecv1.ListServersResponse{Servers: out}, nil
}

// ListTools lists the tools of one server, or of all.
func (s *Server) ListTools(_ context.Context, req *cexecv1.ListToolsRequest) (*cexecv1.ListToolsResponse, error) {
	if s.d.Tools == nil {
		return nil, status.Error(codes.Unimplemented, "list tools: no tool catalog wired into cexecd")
	}
	tools := s.d.Tools.Tools()
	srv := req.GetServer()
	if srv != "" {
		if err := s.knownServer(srv, tools); err != nil {
			return nil, err
		}
	}
	out := make([]*cexecv1.ToolInfo, 0, len(tools))
	for _, t := range tools {
		if srv == "" || t.Server == srv {
			out = append(out, toolInfo(t))
		}
	}
	return &cexecv1.ListToolsResponse{Tools: out}, nil
}

// knownServer returns a NotFound status naming the servers when srv is
// none of them.
func (s *Server) knownServer(srv string, tools []catalog.Tool) error {
	names := s.serverNames(tools)
	if slices.Contains(names, srv) {
		return nil
	}
	return status.Errorf(codes.NotFound, "unknown server %q (servers: %s)", srv, strings.Join(names, ", "))
}

func (s *Server) serverNames(tools []catalog.Tool) []string {
	var names []string
	for _, st := range s.d.Tools.Servers() {
		names = append(names, st.Name)
	}
	for _, t := range tools {
		if !slices.Contains(names, t.Server) {
			names = append(names, t.Server)
		}
	}
	return names
}

func toolInfo(t catalog.Tool) *cexecv1.ToolInfo {
	return &cexecv1.ToolInfo{
		Id: t.ID, Server: t.Server, Name: t.Name, Title: t.Title, Description: t.Description,
		Import: t.Stub.Import, Signature: t.Stub.Signature, Local: t.Local != nil,
	}
}

// GetTool returns one tool with its stub source, schemas and annotations.
func (s *Server) GetTool(_ context.Context, req *cexecv1.GetToolRequest) (*cexecv1.GetToolResponse, error) {
	if s.d.Tools == nil {
		return nil, status.Error(codes.Unimplemented, "get tool: no tool catalog wired into cexecd")
	}
	server, name, ok := strings.Cut(req.GetId(), "/")
	if !ok || server == "" || name == "" {
		return nil, status.Errorf(codes.InvalidArgument, "tool id %q: want server/tool, e.g. filesystem/read_text_file", req.GetId())
	}
	t, ok := s.d.Tools.Tool(server, name)
	if !ok {
		return nil, s.toolNotFound(server, name)
	}
	out := &cexecv1.GetToolResponse{Tool: toolInfo(t), InputSchemaJson: t.InputSchema, OutputSchemaJson: t.OutputSchema}
	if src, ok := s.d.Tools.StubSource(t.ID); ok {
		out.StubSource = string(src)
	}
	if t.Local == nil {
		// The MCP spelling (readOnlyHint, ...), as the server sent them.
		ann, err := json.Marshal(mcp.ToolAnnotation(t.Annotations))
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encode annotations of %s: %v", t.ID, err)
		}
		out.AnnotationsJson = ann
	}
	return out, nil
}

// toolNotFound names the closest tools of the server, or the servers.
func (s *Server) toolNotFound(server, name string) error {
	tools := s.d.Tools.Tools()
	if err := s.knownServer(server, tools); err != nil {
		return err
	}
	type near struct {
		name string
		d    int
	}
	var cands []near
	for _, t := range tools {
		if t.Server == server {
			cands = append(cands, near{t.Name, levenshtein.Distance(name, t.Name, nil)})
		}
	}
	slices.SortStableFunc(cands, func(a, b near) int { return a.d - b.d })
	var names []string
	for _, c := range cands[:min(3, len(cands))] {
		names = append(names, server+"/"+c.name)
	}
	if len(names) == 0 {
		return status.Errorf(codes.NotFound, "server %s has no tools (yet): is it connected? see `cexecctl servers ls`", server)
	}
	return status.Errorf(codes.NotFound, "server %s has no tool %q; closest: %s", server, name, strings.Join(names, ", "))
}

// RefreshTools lists one server's tools again ("" for every server and the
// local tools), regenerating stubs, and reports how many tools it has now.
func (s *Server) RefreshTools(ctx context.Context, req *cexecv1.RefreshToolsRequest) (*cexecv1.RefreshToolsResponse, error) {
	if s.d.Tools == nil {
		return nil, status.Error(codes.Unimplemented, "refresh tools: no tool catalog wired into cexecd")
	}
	srv := req.GetServer()
	if srv != "" {
		if err := s.knownServer(srv, s.d.Tools.Tools()); err != nil {
			return nil, err
		}
	}
	if err := s.d.Tools.Refresh(ctx, srv); err != nil {
		s.d.Log.Warn("refresh tools failed", "server", srv, "error", err)
		return nil, catalogStatus(err)
	}
	n := 0
	for _, t := range s.d.Tools.Tools() {
		if srv == "" || t.Server == srv {
			n++
		}
	}
	return &cexecv1.RefreshToolsResponse{Tools: int32(n)}, nil
}

// catalogStatus maps the catalog's errors to gRPC codes, keeping the
// message.
func catalogStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, catalog.ErrUnknownServer):
		code = codes.NotFound
	case errors.Is(err, catalog.ErrUnavailable), errors.Is(err, catalog.ErrConnectionLost):
		code = codes.FailedPrecondition
	case errors.Is(err, catalog.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, fmt.Sprint(err))
}
