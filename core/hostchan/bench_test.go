package hostchan

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// BenchmarkHostCall times sequential host calls from a program in a real
// bwrap sandbox, answered at once by the host: the transport alone, over
// the direct socket and over the relay (zygote, plugin, gRPC), in
// alternating executions of 2,000 calls each. It reports the medians in
// microseconds per call, as the program timed them.
//
//	go test -run '^$' -bench HostCall -benchtime 5x ./core/hostchan
func BenchmarkHostCall(b *testing.B) {
	relay, direct, _ := bwrapBackend(b)
	createBox(b, relay, "sbx-relay")
	createBox(b, direct, "sbx-direct")
	const code = `
import time, cexec
payload = {"server": "memory", "tool": "search_nodes", "arguments": {"query": "alice"}}
for _ in range(200):
    cexec._host_call("echo", payload)
t0 = time.perf_counter()
for _ in range(2000):
    cexec._host_call("echo", payload)
print((time.perf_counter() - t0) / 2000 * 1e6, cexec._direct is not None)
`
	reply := json.RawMessage(`{"entities":[{"name":"alice","entityType":"person","observations":["likes tea"]}],"relations":[]}`)
	host := func() *plugintest.Host {
		return &plugintest.Host{OnCall: func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return reply, nil }}
	}
	perCall := func(sb sandbox.Sandbox, id string, wantDirect bool) float64 {
		h := host()
		execIn(b, sb, id, code, h)
		f := strings.Fields(h.Stdout())
		if len(f) != 2 || !strings.EqualFold(f[1], strconv.FormatBool(wantDirect)) {
			b.Fatalf("program printed %q %q, want the direct socket used: %v", h.Stdout(), h.Stderr(), wantDirect)
		}
		us, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			b.Fatal(err)
		}
		return us
	}
	var d, r []float64
	for b.Loop() {
		d = append(d, perCall(direct, "sbx-direct", true))
		r = append(r, perCall(relay, "sbx-relay", false))
	}
	b.ReportMetric(median(d), "direct-us/call")
	b.ReportMetric(median(r), "relay-us/call")
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

// BenchmarkSocketRoundTrip is one host call over the socket from a Go
// client in this process, answered at once: the daemon's own work per
// direct call (framing, token-bound dispatch, reply) plus a unix socket
// round trip.
func BenchmarkSocketRoundTrip(b *testing.B) {
	srv := newServer(b)
	m, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		b.Fatal(err)
	}
	reply := json.RawMessage(`{"entities":[{"name":"alice","entityType":"person","observations":["likes tea"]}],"relations":[]}`)
	tok, revoke, err := srv.Grant(b.Context(), "sbx-a", &plugintest.Host{OnCall: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return reply, nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer revoke()
	p := dial(b, m.Source)
	p.send(b, runtime.HostHello{Op: "hello", Token: tok})
	params := map[string]any{"server": "memory", "tool": "search_nodes", "arguments": map[string]any{"query": "alice"}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if got := p.call(b, i, "call_tool", params); got["op"] != "reply" {
			b.Fatalf("got %v", got)
		}
	}
}

// BenchmarkExecutionCycle is the direct channel's fixed cost per execution
// that makes one call: grant, connect, hello, the call, revoke.
func BenchmarkExecutionCycle(b *testing.B) {
	srv := newServer(b)
	m, err := srv.Open("sbx-a", nil, runtime.Options{})
	if err != nil {
		b.Fatal(err)
	}
	host := &plugintest.Host{OnCall: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}
	b.ReportAllocs()
	for b.Loop() {
		tok, revoke, err := srv.Grant(b.Context(), "sbx-a", host)
		if err != nil {
			b.Fatal(err)
		}
		p := dial(b, m.Source)
		p.send(b, runtime.HostHello{Op: "hello", Token: tok})
		if got := p.call(b, 1, "call_tool", nil); got["op"] != "reply" {
			b.Fatalf("got %v", got)
		}
		revoke()
		_ = p.c.Close()
	}
}
