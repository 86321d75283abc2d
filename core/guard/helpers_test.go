package guard_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/internal/testutil/piitest"
	"github.com/cexec/cexec/pluginapi"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

// fakeGuard is a guard plugin whose hooks are functions; a nil function is
// an unimplemented hook. It records what it was asked.
type fakeGuard struct {
	code   func(guardapi.CheckCodeRequest) (guardapi.Decision, error)
	call   func(guardapi.CheckToolCallRequest) (guardapi.Decision, error)
	detect func(guardapi.DetectRequest) ([]guardapi.Span, error)

	mu    sync.Mutex
	codes []guardapi.CheckCodeRequest
	calls []guardapi.CheckToolCallRequest
	texts []string
}

func (f *fakeGuard) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{Name: "fake", Kind: pluginapi.KindGuard, Version: "0", APIVersions: []string{guardapi.APIVersion}}, nil
}

func (f *fakeGuard) Configure(context.Context, json.RawMessage, string) (pluginapi.Diagnostics, error) {
	return nil, nil
}

func (f *fakeGuard) CheckCode(_ context.Context, req guardapi.CheckCodeRequest) (guardapi.Decision, error) {
	f.mu.Lock()
	f.codes = append(f.codes, req)
	f.mu.Unlock()
	if f.code == nil {
		return guardapi.Decision{}, pluginapi.ErrUnimplemented
	}
	return f.code(req)
}

func (f *fakeGuard) CheckToolCall(_ context.Context, req guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	if f.call == nil {
		return guardapi.Decision{}, pluginapi.ErrUnimplemented
	}
	return f.call(req)
}

func (f *fakeGuard) Detect(_ context.Context, req guardapi.DetectRequest) ([]guardapi.Span, error) {
	f.mu.Lock()
	f.texts = append(f.texts, req.Text)
	f.mu.Unlock()
	if f.detect == nil {
		return nil, pluginapi.ErrUnimplemented
	}
	return f.detect(req)
}

// serve serves impl over real in-process gRPC, through the same client
// adapter cexecd uses, and returns the host side plus a function that
// stops the plugin's server, as a crashed plugin would.
func serve(t testing.TB, impl guardapi.Guard) (guard.Plugin, func()) {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		string(pluginapi.KindGuard): &guardapi.GRPCPlugin{Impl: impl},
	})
	var once sync.Once
	stop := func() { once.Do(server.Stop) }
	t.Cleanup(func() {
		stop()
		_ = client.Close()
	})
	raw, err := client.Dispense(string(pluginapi.KindGuard))
	if err != nil {
		t.Fatal(err)
	}
	return raw.(guardapi.Guard), stop
}

// piiGuard is a guard plugin that detects the common PII types with plain
// regular expressions (piitest.Detector); process_test.go runs the real
// guard-pii plugin.
func piiGuard(testing.TB) *fakeGuard {
	return &fakeGuard{detect: func(req guardapi.DetectRequest) ([]guardapi.Span, error) {
		return piitest.Detector{}.Detect(context.Background(), req)
	}}
}

func allow(guardapi.CheckCodeRequest) (guardapi.Decision, error) {
	return guardapi.Decision{Allow: true}, nil
}

func deny(summary, detail string) guardapi.Decision {
	return guardapi.Decision{Diagnostics: pluginapi.Diagnostics{pluginapi.Errorf("", summary, detail)}}
}

// logBuffer is an hclog logger writing JSON lines into a buffer.
type logBuffer struct{ testutil.Buffer }

func (b *logBuffer) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: b, JSONFormat: true})
}

func (b *logBuffer) contains(s string) bool { return strings.Contains(b.String(), s) }
