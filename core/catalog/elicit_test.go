package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/config"
)

// askingServer is an mcp-go MCP server whose "ask" tool asks the client
// for a word (with mcp-go's InputRequestBuilder: a multi round-trip request
// for 2026-07-28 clients, an elicitation/create request for earlier ones)
// and returns the answer, and whose "sample" tool asks for sampling, which
// cexec must refuse.
func askingServer() *server.MCPServer {
	s := server.NewMCPServer("asking", "1.0.0", server.WithElicitation(),
		// listChanged: a 2025-11-25 client then opens the GET stream, where
		// mcp-go sends sampling requests.
		server.WithToolCapabilities(true),
		//lint:ignore SA1019 the point is a server that still sends sampling/createMessage
		server.WithLegacyServerInitiatedRequests())
	s.AddTool(mcp.NewTool("ask", mcp.WithDescription("Ask the user for a word.")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.ElicitationResponse(req.Params.InputResponses, "word"); r != nil {
			b, _ := json.Marshal(r.Content)
			return mcp.NewToolResultText(fmt.Sprintf("action=%s content=%s", r.Action, b)), nil
		}
		return server.NewInputRequestBuilder("").Elicit("word", mcp.ElicitationParams{
			Message: "Which word?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}},
				"required": []string{"word"}},
		}).ToolResult(), nil
	})
	s.AddTool(mcp.NewTool("sample", mcp.WithDescription("Ask the client's model.")), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		//lint:ignore SA1019 the point is a server that still asks for sampling
		_, err := s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hi")}}, MaxTokens: 5}})
		return mcp.NewToolResultText(fmt.Sprintf("sampling: %v", err)), nil
	})
	return s
}

// wordAsker answers every elicitation with its word, or with action when
// set, and records the questions.
type wordAsker struct {
	word   string
	action mcp.ElicitationResponseAction

	mu    sync.Mutex
	asked []string
}

func (a *wordAsker) Elicit(_ context.Context, server string, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, server+": "+p.Message)
	a.mu.Unlock()
	if a.action != "" {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: a.action}}, nil
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"word": a.word}}}, nil
}

func (a *wordAsker) questions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestElicitationRelay calls a real mcp-go server over streamable HTTP, on
// the newest protocol (multi round-trip input requests) and on 2025-11-25
// (elicitation/create on the call's response stream): the question reaches
// the asker of the call that caused it, and only that one, also when two
// agents' calls run at once; a decline and a call with nobody to ask fail
// with errors that say so; sampling is refused with a clear message.
func TestElicitationRelay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
	}{
		{"newest protocol", nil},
		{"2025-11-25", []string{"2025-11-25"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []server.StreamableHTTPOption
			if tc.versions != nil {
				opts = append(opts, server.WithStreamableHTTPProtocolVersions(tc.versions...))
			}
			ts := httptest.NewServer(server.NewStreamableHTTPServer(askingServer(), opts...))
			t.Cleanup(ts.Close)
			c := start(t, Options{}, &config.MCPServer{Name: "asking", Transport: config.TransportHTTP, URL: ts.URL + "/mcp", Timeout: 20 * time.Second})
			st, _ := c.Server("asking")
			t.Logf("protocol %s", st.ProtocolVersion)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			// Two agents at once: each gets its own question and the server
			// each one's own answer.
			a, b := &wordAsker{word: "apple"}, &wordAsker{word: "banana"}
			var wg sync.WaitGroup
			results := map[*wordAsker]string{}
			var mu sync.Mutex
			for _, asker := range []*wordAsker{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := c.Call(WithAsker(ctx, asker), "default", "asking", "ask", nil)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						results[asker] = "error: " + err.Error()
						return
					}
					results[asker] = resultText(res)
				}()
			}
			wg.Wait()
			for _, asker := range []*wordAsker{a, b} {
				if q := asker.questions(); len(q) != 1 || q[0] != "asking: Which word?" {
					t.Errorf("asker %s was asked %q", asker.word, q)
				}
				if want := `"word":"` + asker.word + `"`; !strings.Contains(results[asker], want) {
					t.Errorf("asker %s's call returned %q, want the answer %s", asker.word, results[asker], want)
				}
			}

			for _, action := range []mcp.ElicitationResponseAction{mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionCancel} {
				_, err := c.Call(WithAsker(ctx, &wordAsker{action: action}), "default", "asking", "ask", nil)
				if err == nil || !strings.Contains(err.Error(), "asked for input during the call and the user") {
					t.Errorf("%s: err = %v, want the call to fail saying the user did not answer", action, err)
				}
			}
			if _, err := c.Call(ctx, "default", "asking", "ask", nil); err == nil || !strings.Contains(err.Error(), "nobody could be asked") {
				t.Errorf("no asker: err = %v, want the call to fail saying nobody could be asked", err)
			}

			if tc.versions != nil {
				res, err := c.Call(WithAsker(ctx, a), "default", "asking", "sample", nil)
				if err != nil || !strings.Contains(resultText(res), samplingRefused) {
					t.Errorf("sampling: %v, %v; want the server to get %q", res, err, samplingRefused)
				}
			}
		})
	}
}

// TestInflightAttribution: a request that names no call goes to the
// connection's call when there is one, or to its calls' asker when they all
// share one; anything else is ambiguous and declined.
func TestInflightAttribution(t *testing.T) {
	a, b := &wordAsker{word: "a"}, &wordAsker{word: "b"}
	for _, tc := range []struct {
		name   string
		askers []Asker
		want   Asker
		ok     bool
	}{
		{"no call", nil, nil, false},
		{"one call", []Asker{a}, a, true},
		{"one call, nobody to ask", []Asker{nil}, nil, true},
		{"two calls of one agent", []Asker{a, a}, a, true},
		{"two agents", []Asker{a, b}, nil, false},
		{"an agent and a call without asker", []Asker{a, nil}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f inflight
			for _, x := range tc.askers {
				_, _, done := f.track(WithAsker(context.Background(), x))
				defer done()
			}
			s, err := f.only()
			if (err == nil) != tc.ok {
				t.Fatalf("only() = %v, %v", s, err)
			}
			if tc.ok && s.asker != tc.want {
				t.Errorf("asker %v, want %v", s.asker, tc.want)
			}
		})
	}
}

// silentAsker never answers: it waits for its context.
type silentAsker struct{}

func (silentAsker) Elicit(ctx context.Context, _ string, _ mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestElicitationUnanswered: a question nobody answers ends with the call,
// at the server's timeout, and the call fails saying the user did not
// answer in time.
func TestElicitationUnanswered(t *testing.T) {
	ts := httptest.NewServer(server.NewStreamableHTTPServer(askingServer()))
	t.Cleanup(ts.Close)
	c := start(t, Options{}, &config.MCPServer{Name: "asking", Transport: config.TransportHTTP, URL: ts.URL + "/mcp", Timeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Call(WithAsker(ctx, &silentAsker{}), "default", "asking", "ask", nil)
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("err = %v, want the call to fail saying the user did not answer in time", err)
	}
}
