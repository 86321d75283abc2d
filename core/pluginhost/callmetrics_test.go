package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cexec/cexec/core/metrics"
)

// TestUnaryCallMetrics checks which answers count in
// cexec_plugin_call_errors_total: an optional hook the plugin does not
// implement is an answer, not a failure, so an alert on the counter does
// not fire at every start of the default config (the pii guard implements
// no CheckCode).
var metricsRuns atomic.Int32

func TestUnaryCallMetrics(t *testing.T) {
	tests := []struct {
		method string
		err    error
		errors bool
	}{
		{"/cexec.plugin.guard.v1.Guard/OkCall", nil, false},
		{"/cexec.plugin.guard.v1.Guard/Unimplemented", status.Error(codes.Unimplemented, "not implemented by this plugin"), false},
		{"/cexec.plugin.guard.v1.Guard/Unavailable", status.Error(codes.Unavailable, "plugin exited"), true},
		{"/cexec.plugin.guard.v1.Guard/Plain", errors.New("boom"), true},
	}
	// Its own plugin label per run: the registry is the process's, and
	// -count=2 would find the first run's counts.
	plugin := fmt.Sprint("metricstest", metricsRuns.Add(1))
	intercept := unaryCallMetrics("guard", plugin)
	for _, tt := range tests {
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return tt.err }
		if err := intercept(context.Background(), tt.method, nil, nil, nil, invoker); !errors.Is(err, tt.err) {
			t.Fatalf("%s: interceptor returned %v, want %v", tt.method, err, tt.err)
		}
	}
	rec := httptest.NewRecorder()
	metrics.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, tt := range tests {
		name := tt.method[strings.LastIndex(tt.method, "/")+1:]
		calls := `cexec_plugin_call_duration_seconds_count{kind="guard",method="` + name + `",plugin="` + plugin + `"} 1`
		if !strings.Contains(body, calls) {
			t.Errorf("%s: no %s in the scrape", name, calls)
		}
		errLine := `cexec_plugin_call_errors_total{kind="guard",method="` + name + `",plugin="` + plugin + `"} 1`
		if got := strings.Contains(body, errLine); got != tt.errors {
			t.Errorf("%s: counted as an error = %v, want %v", name, got, tt.errors)
		}
	}
}
