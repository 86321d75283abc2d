package telemetry

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/cexec/cexec/core/config"
)

// receiver is an OTLP trace receiver (gRPC TraceService, or HTTP
// /v1/traces with protobuf bodies) that keeps what it is sent.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	headers []map[string]string
}

func (r *receiver) keep(req *coltracepb.ExportTraceServiceRequest, h map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers = append(r.headers, h)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.keep(req, nil)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *receiver) got() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func (r *receiver) names() map[string]*tracepb.Span {
	out := map[string]*tracepb.Span{}
	for _, s := range r.got() {
		out[s.GetName()] = s
	}
	return out
}

func grpcReceiver(t testing.TB) (*receiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r, ln.Addr().String()
}

func httpReceiver(t testing.TB) (*receiver, string) {
	t.Helper()
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.keep(&ex, map[string]string{"x-api-key": req.Header.Get("x-api-key")})
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// setup turns tracing on for the test and returns its shutdown.
func setup(t testing.TB, tc *config.Traces) func() {
	t.Helper()
	shutdown, err := Setup(context.Background(), tc, Options{ServiceName: "cexecd-test", ServiceVersion: "test", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

func hexID(b []byte) string { return hex.EncodeToString(b) }

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}
