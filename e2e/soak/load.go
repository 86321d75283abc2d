package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/api/endpoint"
)

// execOutput is the part of execute_code's structuredContent the harness
// reads.
type execOutput struct {
	OK     bool   `json:"ok"`
	Stdout string `json:"stdout"`
	Error  *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	ExitCode int  `json:"exit_code"`
	TimedOut bool `json:"timed_out"`
}

// record is what the executions returned, checked as they return.
type record struct {
	mu      sync.Mutex
	ok      int
	failed  int
	latency []time.Duration
	// acked holds, per tenant, the iterations whose state write an ok
	// reply acknowledged.
	acked map[string][]int
	// rawPII counts replies that carried a raw value the harness
	// generated; rawExamples keeps a few.
	rawPII      int
	rawExamples []string
	// untokenized counts ok replies whose PII did not come back as tokens.
	untokenized int
	// errors counts model-facing failures by kind; unclear those of them
	// that explain nothing.
	errors  map[string]int
	unclear map[string]int
	// dropped counts client-side failures (no reply) while the daemon was
	// being killed; unexpected those at any other time.
	dropped    map[string]int
	unexpected map[string]int
	// sessions counts the MCP sessions opened per tenant.
	sessions map[string]int
}

func newRecord() *record {
	return &record{acked: map[string][]int{}, errors: map[string]int{}, unclear: map[string]int{},
		dropped: map[string]int{}, unexpected: map[string]int{}, sessions: map[string]int{}}
}

// reply checks one execute_code reply.
func (r *record) reply(j job, res *mcp.CallToolResult, took time.Duration) {
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	structured, _ := json.Marshal(res.StructuredContent)
	var out execOutput
	_ = json.Unmarshal(structured, &out)
	raw := j.rawPII(text.String() + "\n" + string(structured))

	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = append(r.latency, took)
	if len(raw) > 0 {
		r.rawPII++
		if len(r.rawExamples) < 5 {
			r.rawExamples = append(r.rawExamples, fmt.Sprintf("execution %d (%s): %q in %.300q", j.i, j.tenant, raw, text.String()))
		}
	}
	if !res.IsError && out.OK {
		saved, tokenized := j.acked(out.Stdout)
		if saved {
			r.ok++
			r.acked[j.tenant] = append(r.acked[j.tenant], j.i)
			if !tokenized && len(raw) == 0 {
				r.untokenized++
			}
			return
		}
		r.failed++
		r.errors[errorKind("ok reply without the program's last line: "+out.Stdout)]++
		return
	}
	r.failed++
	msg := text.String()
	switch {
	case out.Error != nil:
		msg = out.Error.Type + ": " + out.Error.Message
	case out.TimedOut:
		msg = "timed out: " + lastLine(text.String())
	}
	kind := errorKind(msg)
	r.errors[kind]++
	if why := unclear(msg); why != "" {
		r.unclear[kind+" ("+why+")"]++
	}
}

// noReply records a call that got no reply at all; daemonKilled says the
// daemon was killed while it was in flight.
func (r *record) noReply(err error, daemonKilled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
	if daemonKilled {
		r.dropped[errorKind(err.Error())]++
		return
	}
	r.unexpected[errorKind(err.Error())]++
}

func (r *record) opened(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions[tenant]++
}

// takeLatency returns and forgets the latencies recorded so far, sorted.
func (r *record) takeLatency() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.latency
	r.latency = nil
	slices.Sort(l)
	return l
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// session is one MCP session of one tenant, as an agent holds it.
type session struct {
	c     *client.Client
	uses  int
	epoch int // the daemon it was opened with
}

// openSession connects to the daemon's private MCP socket as tenant. hc
// is shared by every session, as in one agent process, so connections are
// reused and counted once.
func openSession(ctx context.Context, hc *http.Client, tenant string) (*session, error) {
	c, err := client.NewStreamableHttpClient(endpoint.UnixBaseURL+endpoint.MCPPath,
		transport.WithHTTPBasicClient(hc),
		transport.WithHTTPHeaders(map[string]string{endpoint.TenantHeader: tenant}))
	if err != nil {
		return nil, fmt.Errorf("mcp client: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("start mcp client: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cexec-soak", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize mcp session as %s: %w", tenant, err)
	}
	return &session{c: c}, nil
}

// executeCode runs j's program in s.
func (s *session) executeCode(ctx context.Context, j job) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "execute_code"
	req.Params.Arguments = map[string]any{"code": j.program()}
	s.uses++
	return s.c.CallTool(ctx, req)
}
