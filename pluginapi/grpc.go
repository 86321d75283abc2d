package pluginapi

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/common/v1"
)

// codeOf pairs each sentinel error with the gRPC code it travels as. The
// order matters only for errors that wrap several sentinels: the first match
// wins.
var codeOf = []struct {
	err  error
	code codes.Code
}{
	{ErrNotFound, codes.NotFound},
	{ErrDenied, codes.PermissionDenied},
	{ErrInvalidArgument, codes.InvalidArgument},
	{ErrUnimplemented, codes.Unimplemented},
	{ErrPluginShutdown, codes.Unavailable},
	{ErrUnavailable, codes.FailedPrecondition},
	{ErrResourceExhausted, codes.ResourceExhausted},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// ToStatus turns an error returned by a plugin implementation into a gRPC
// status error for the wire. Sentinel errors (ErrNotFound, ...) and the
// context errors get their own codes; errors that already carry a status keep
// it; anything else becomes codes.Unknown. The message is kept in every case.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range codeOf {
		if errors.Is(err, m.err) {
			return status.Error(m.code, err.Error())
		}
	}
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// FromStatus turns a gRPC status error received from the other side into an
// error for which errors.Is matches the corresponding sentinel (or
// context.Canceled / context.DeadlineExceeded), with the remote message as its
// text. The result still carries the status, so status.Code works on it.
// codes.Unavailable, which is also what a dead plugin's connection reports,
// becomes ErrPluginShutdown. Errors that are not status errors, and codes
// without a sentinel, are returned unchanged. Client adapters use
// FromStatusContext, which also recognizes a closed connection.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*remoteError); ok {
		return err
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, m := range codeOf {
		if m.code == s.Code() {
			return &remoteError{st: s, sentinel: m.err}
		}
	}
	return err
}

// FromStatusContext is FromStatus for the error of a call made with ctx. A
// cancellation that ctx did not cause means the call was cut off from the
// other end: the host closed the plugin's connection, or the plugin is
// stopping and cancelled its handlers. Either way the plugin went away, so
// the error becomes ErrPluginShutdown.
func FromStatusContext(ctx context.Context, err error) error {
	err = FromStatus(err)
	if re, ok := err.(*remoteError); ok && re.st.Code() == codes.Canceled && ctx.Err() == nil {
		return &remoteError{st: re.st, sentinel: ErrPluginShutdown}
	}
	return err
}

// remoteError is an error that crossed the gRPC boundary: its text is the
// remote message, it unwraps to the matching sentinel and it still reports
// its gRPC status.
type remoteError struct {
	st       *status.Status
	sentinel error
}

func (e *remoteError) Error() string {
	if msg := e.st.Message(); msg != "" {
		return msg
	}
	return e.sentinel.Error()
}

func (e *remoteError) Unwrap() error { return e.sentinel }

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *remoteError) GRPCStatus() *status.Status { return e.st }

// SeverityToProto converts a Severity for the wire.
func SeverityToProto(s Severity) commonv1.Severity {
	if s == SeverityWarning {
		return commonv1.Severity_SEVERITY_WARNING
	}
	return commonv1.Severity_SEVERITY_ERROR
}

// SeverityFromProto converts a wire severity; unspecified counts as an error
// so that a sloppy plugin cannot downgrade a problem to a warning.
func SeverityFromProto(s commonv1.Severity) Severity {
	if s == commonv1.Severity_SEVERITY_WARNING {
		return SeverityWarning
	}
	return SeverityError
}

// DiagnosticsToProto converts diagnostics for the wire.
func DiagnosticsToProto(ds Diagnostics) []*commonv1.Diagnostic {
	if len(ds) == 0 {
		return nil
	}
	out := make([]*commonv1.Diagnostic, len(ds))
	for i, d := range ds {
		out[i] = &commonv1.Diagnostic{
			Severity:  SeverityToProto(d.Severity),
			Summary:   d.Summary,
			Detail:    d.Detail,
			Attribute: d.Attribute,
		}
	}
	return out
}

// DiagnosticsFromProto converts wire diagnostics.
func DiagnosticsFromProto(ds []*commonv1.Diagnostic) Diagnostics {
	if len(ds) == 0 {
		return nil
	}
	out := make(Diagnostics, len(ds))
	for i, d := range ds {
		out[i] = Diagnostic{
			Severity:  SeverityFromProto(d.GetSeverity()),
			Summary:   d.GetSummary(),
			Detail:    d.GetDetail(),
			Attribute: d.GetAttribute(),
		}
	}
	return out
}

// ConfigSchemaToProto converts a config schema, nested blocks included, for
// the wire.
func ConfigSchemaToProto(s ConfigSchema) *commonv1.ConfigSchema {
	out := &commonv1.ConfigSchema{}
	for _, a := range s.Attributes {
		out.Attributes = append(out.Attributes, &commonv1.Attribute{
			Name:        a.Name,
			Type:        a.Type,
			Required:    a.Required,
			Description: a.Description,
			Sensitive:   a.Sensitive,
		})
	}
	for _, b := range s.Blocks {
		nesting := commonv1.Nesting_NESTING_SINGLE
		if b.List {
			nesting = commonv1.Nesting_NESTING_LIST
		}
		out.Blocks = append(out.Blocks, &commonv1.NestedBlock{
			TypeName: b.TypeName,
			Nesting:  nesting,
			Body:     ConfigSchemaToProto(b.Body),
		})
	}
	return out
}

// ConfigSchemaFromProto converts a wire config schema; a nil schema is empty.
func ConfigSchemaFromProto(s *commonv1.ConfigSchema) ConfigSchema {
	var out ConfigSchema
	for _, a := range s.GetAttributes() {
		out.Attributes = append(out.Attributes, Attribute{
			Name:        a.GetName(),
			Type:        a.GetType(),
			Required:    a.GetRequired(),
			Description: a.GetDescription(),
			Sensitive:   a.GetSensitive(),
		})
	}
	for _, b := range s.GetBlocks() {
		out.Blocks = append(out.Blocks, NestedBlock{
			TypeName: b.GetTypeName(),
			List:     b.GetNesting() == commonv1.Nesting_NESTING_LIST,
			Body:     ConfigSchemaFromProto(b.GetBody()),
		})
	}
	return out
}

// InfoToProto converts plugin info for the wire.
func InfoToProto(i Info) *commonv1.PluginInfo {
	return &commonv1.PluginInfo{
		Name:         i.Name,
		Kind:         string(i.Kind),
		Version:      i.Version,
		ApiVersions:  append([]string(nil), i.APIVersions...),
		ConfigSchema: ConfigSchemaToProto(i.ConfigSchema),
	}
}

// InfoFromProto converts wire plugin info.
func InfoFromProto(p *commonv1.PluginInfo) Info {
	return Info{
		Name:         p.GetName(),
		Kind:         Kind(p.GetKind()),
		Version:      p.GetVersion(),
		APIVersions:  append([]string(nil), p.GetApiVersions()...),
		ConfigSchema: ConfigSchemaFromProto(p.GetConfigSchema()),
	}
}

// BaseRPC is the Info/Configure part of every kind's generated gRPC client
// (selectorv1.SelectorClient and the others all satisfy it).
type BaseRPC interface {
	Info(ctx context.Context, in *commonv1.InfoRequest, opts ...grpc.CallOption) (*commonv1.PluginInfo, error)
	Configure(ctx context.Context, in *commonv1.ConfigureRequest, opts ...grpc.CallOption) (*commonv1.ConfigureResponse, error)
}

// BaseClient implements Base over any kind's gRPC client. Kind packages embed
// it in their client adapters.
type BaseClient struct {
	RPC BaseRPC
}

// Info asks the plugin who it is.
func (c BaseClient) Info(ctx context.Context) (Info, error) {
	resp, err := c.RPC.Info(ctx, &commonv1.InfoRequest{})
	if err != nil {
		return Info{}, FromStatusContext(ctx, err)
	}
	return InfoFromProto(resp), nil
}

// Configure sends the decoded config block and the chosen API version.
func (c BaseClient) Configure(ctx context.Context, config json.RawMessage, apiVersion string) (Diagnostics, error) {
	resp, err := c.RPC.Configure(ctx, &commonv1.ConfigureRequest{ConfigJson: config, ApiVersion: apiVersion})
	if err != nil {
		return nil, FromStatusContext(ctx, err)
	}
	return DiagnosticsFromProto(resp.GetDiagnostics()), nil
}

// HandleInfo answers an Info RPC from impl. Kind packages call it from their
// server adapters.
func HandleInfo(ctx context.Context, impl Base) (*commonv1.PluginInfo, error) {
	info, err := impl.Info(ctx)
	if err != nil {
		return nil, ToStatus(err)
	}
	return InfoToProto(info), nil
}

// HandleConfigure answers a Configure RPC from impl. Kind packages call it
// from their server adapters.
func HandleConfigure(ctx context.Context, impl Base, req *commonv1.ConfigureRequest) (*commonv1.ConfigureResponse, error) {
	diags, err := impl.Configure(ctx, req.GetConfigJson(), req.GetApiVersion())
	if err != nil {
		return nil, ToStatus(err)
	}
	return &commonv1.ConfigureResponse{Diagnostics: DiagnosticsToProto(diags)}, nil
}
