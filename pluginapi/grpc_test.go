package pluginapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/pluginapi"
	commonv1 "github.com/cexec/cexec/pluginapi/proto/cexec/plugin/common/v1"
)

func TestToStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"not found", pluginapi.ErrNotFound, codes.NotFound, "not found"},
		{"wrapped not found", fmt.Errorf("sandbox sb1: %w", pluginapi.ErrNotFound), codes.NotFound, "sandbox sb1: not found"},
		{"denied", fmt.Errorf("policy p: %w", pluginapi.ErrDenied), codes.PermissionDenied, "policy p: denied"},
		{"invalid argument", pluginapi.ErrInvalidArgument, codes.InvalidArgument, "invalid argument"},
		{"unimplemented", pluginapi.ErrUnimplemented, codes.Unimplemented, "not implemented by this plugin"},
		{"plugin shutdown", pluginapi.ErrPluginShutdown, codes.Unavailable, "plugin is not running"},
		{"unavailable", fmt.Errorf("no kvm: %w", pluginapi.ErrUnavailable), codes.FailedPrecondition, "no kvm: unavailable"},
		{"resource exhausted", pluginapi.ErrResourceExhausted, codes.ResourceExhausted, "resource exhausted"},
		{"canceled", fmt.Errorf("run: %w", context.Canceled), codes.Canceled, "run: context canceled"},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded"},
		{"plain error", errors.New("disk on fire"), codes.Unknown, "disk on fire"},
		{"status kept", status.Error(codes.AlreadyExists, "sandbox exists"), codes.AlreadyExists, "sandbox exists"},
		{"first sentinel wins", fmt.Errorf("%w: %w", pluginapi.ErrNotFound, pluginapi.ErrDenied), codes.NotFound, "not found: denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pluginapi.ToStatus(tt.err)
			s, ok := status.FromError(got)
			if !ok {
				t.Fatalf("ToStatus(%v) = %v, not a status error", tt.err, got)
			}
			if s.Code() != tt.code || s.Message() != tt.msg {
				t.Errorf("ToStatus(%v) = %v %q, want %v %q", tt.err, s.Code(), s.Message(), tt.code, tt.msg)
			}
		})
	}
	if pluginapi.ToStatus(nil) != nil {
		t.Error("ToStatus(nil) != nil")
	}
}

func TestFromStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error // sentinel errors.Is must match; nil: returned unchanged
		msg  string
	}{
		{"not found", status.Error(codes.NotFound, "sandbox sb1: not found"), pluginapi.ErrNotFound, "sandbox sb1: not found"},
		{"denied", status.Error(codes.PermissionDenied, "no"), pluginapi.ErrDenied, "no"},
		{"invalid argument", status.Error(codes.InvalidArgument, "bad query"), pluginapi.ErrInvalidArgument, "bad query"},
		{"unimplemented", status.Error(codes.Unimplemented, "unknown method Detect"), pluginapi.ErrUnimplemented, "unknown method Detect"},
		{"unavailable is shutdown", status.Error(codes.Unavailable, "connection refused"), pluginapi.ErrPluginShutdown, "connection refused"},
		{"failed precondition", status.Error(codes.FailedPrecondition, "no kvm"), pluginapi.ErrUnavailable, "no kvm"},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "pool full"), pluginapi.ErrResourceExhausted, "pool full"},
		{"canceled", status.Error(codes.Canceled, "context canceled"), context.Canceled, "context canceled"},
		{"deadline", status.Error(codes.DeadlineExceeded, "too slow"), context.DeadlineExceeded, "too slow"},
		{"empty message uses sentinel's", status.Error(codes.NotFound, ""), pluginapi.ErrNotFound, "not found"},
		{"unknown code unchanged", status.Error(codes.Internal, "boom"), nil, "rpc error: code = Internal desc = boom"},
		{"not a status unchanged", io.ErrUnexpectedEOF, nil, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pluginapi.FromStatus(tt.err)
			if tt.want == nil {
				if got != tt.err {
					t.Fatalf("FromStatus(%v) = %v, want it unchanged", tt.err, got)
				}
			} else if !errors.Is(got, tt.want) {
				t.Fatalf("FromStatus(%v) = %v, want errors.Is %v", tt.err, got, tt.want)
			}
			if got.Error() != tt.msg {
				t.Errorf("message = %q, want %q", got.Error(), tt.msg)
			}
			if status.Code(got) != status.Code(tt.err) {
				t.Errorf("status.Code = %v, want %v", status.Code(got), status.Code(tt.err))
			}
		})
	}
	if pluginapi.FromStatus(nil) != nil {
		t.Error("FromStatus(nil) != nil")
	}
}

func TestFromStatusContext(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"caller cancelled", done, status.Error(codes.Canceled, "context canceled"), context.Canceled},
		{"connection closed under a live call", live, status.Error(codes.Canceled, "grpc: the client connection is closing"), pluginapi.ErrPluginShutdown},
		{"plugin stopping", live, status.Error(codes.Canceled, "context canceled"), pluginapi.ErrPluginShutdown},
		{"other codes as FromStatus", live, status.Error(codes.NotFound, "x"), pluginapi.ErrNotFound},
		{"unavailable", done, status.Error(codes.Unavailable, "x"), pluginapi.ErrPluginShutdown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pluginapi.FromStatusContext(tt.ctx, tt.err)
			if !errors.Is(got, tt.want) {
				t.Errorf("FromStatusContext = %v, want errors.Is %v", got, tt.want)
			}
			if s, _ := status.FromError(tt.err); got.Error() != s.Message() {
				t.Errorf("message = %q, want %q", got.Error(), s.Message())
			}
		})
	}
	if pluginapi.FromStatusContext(live, nil) != nil {
		t.Error("FromStatusContext(nil) != nil")
	}
}

// TestStatusRoundTrip checks that every sentinel survives plugin -> wire ->
// host, wrapped or not, and that mapping twice changes nothing.
func TestStatusRoundTrip(t *testing.T) {
	sentinels := []error{
		pluginapi.ErrNotFound, pluginapi.ErrDenied, pluginapi.ErrInvalidArgument,
		pluginapi.ErrUnimplemented, pluginapi.ErrPluginShutdown, pluginapi.ErrUnavailable,
		pluginapi.ErrResourceExhausted, context.Canceled, context.DeadlineExceeded,
	}
	for _, s := range sentinels {
		t.Run(s.Error(), func(t *testing.T) {
			orig := fmt.Errorf("tool fs/read: %w", s)
			got := pluginapi.FromStatus(pluginapi.ToStatus(orig))
			if !errors.Is(got, s) || got.Error() != orig.Error() {
				t.Errorf("round trip of %q = %q (errors.Is %v)", orig, got, errors.Is(got, s))
			}
			again := pluginapi.FromStatus(pluginapi.ToStatus(got))
			if !errors.Is(again, s) || again.Error() != orig.Error() {
				t.Errorf("second round trip = %q", again)
			}
		})
	}
}

func TestDiagnosticsRoundTrip(t *testing.T) {
	in := pluginapi.Diagnostics{
		{Severity: pluginapi.SeverityError, Summary: "bad max_hits", Detail: "must be 1..1000", Attribute: "max_hits"},
		{Severity: pluginapi.SeverityWarning, Summary: "slow model", Detail: "d", Attribute: "embeddings.model"},
	}
	got := pluginapi.DiagnosticsFromProto(pluginapi.DiagnosticsToProto(in))
	if !reflect.DeepEqual(got, in) {
		t.Errorf("round trip = %#v, want %#v", got, in)
	}
	if pluginapi.DiagnosticsToProto(nil) != nil || pluginapi.DiagnosticsFromProto(nil) != nil {
		t.Error("empty diagnostics did not stay nil")
	}
	// A plugin that leaves severity unset must not downgrade an error.
	unset := pluginapi.DiagnosticsFromProto([]*commonv1.Diagnostic{{Summary: "x"}})
	if !unset.HasErrors() {
		t.Errorf("unspecified severity became %v, want error", unset[0].Severity)
	}
}

func TestInfoRoundTrip(t *testing.T) {
	in := pluginapi.Info{
		Name:        "keyword",
		Kind:        pluginapi.KindSelector,
		Version:     "1.2.3",
		APIVersions: []string{"v1", "v2"},
		ConfigSchema: pluginapi.ConfigSchema{
			Attributes: []pluginapi.Attribute{
				{Name: "max_hits", Type: "number", Required: true, Description: "hits"},
				{Name: "api_key", Type: "string", Sensitive: true},
			},
			Blocks: []pluginapi.NestedBlock{
				{TypeName: "embeddings", Body: pluginapi.ConfigSchema{
					Attributes: []pluginapi.Attribute{{Name: "model", Type: "string", Required: true}},
					Blocks: []pluginapi.NestedBlock{{TypeName: "retry", List: true, Body: pluginapi.ConfigSchema{
						Attributes: []pluginapi.Attribute{{Name: "attempts", Type: "number"}},
					}}},
				}},
				{TypeName: "rule", List: true, Body: pluginapi.ConfigSchema{
					Attributes: []pluginapi.Attribute{{Name: "pattern", Type: "list(string)"}},
				}},
			},
		},
	}
	p := pluginapi.InfoToProto(in)
	if got := p.GetConfigSchema().GetBlocks()[0].GetNesting(); got != commonv1.Nesting_NESTING_SINGLE {
		t.Errorf("single block nesting = %v", got)
	}
	if got := p.GetConfigSchema().GetBlocks()[1].GetNesting(); got != commonv1.Nesting_NESTING_LIST {
		t.Errorf("list block nesting = %v", got)
	}
	if got := pluginapi.InfoFromProto(p); !reflect.DeepEqual(got, in) {
		t.Errorf("round trip = %#v, want %#v", got, in)
	}
	if got := pluginapi.InfoFromProto(&commonv1.PluginInfo{Name: "x"}); got.Name != "x" || len(got.ConfigSchema.Attributes) != 0 {
		t.Errorf("info without schema = %#v", got)
	}
}
