package mcpface

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// askingExecutor is an Executor whose program asks the session's user one
// question and prints the answer, or why it could not ask.
type askingExecutor struct{ Executor }

func (askingExecutor) Execute(ctx context.Context, _ Scope, prog Program) (Execution, error) {
	a := AskerFrom(ctx)
	if a == nil {
		return Execution{Stdout: "no asker"}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p := mcp.ElicitationParams{Message: "Which colour?", RequestedSchema: map[string]any{"type": "object",
		"properties": map[string]any{"colour": map[string]any{"type": "string"}}}}
	if prog.Code == "ask_url()" {
		p = mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: "Sign in", URL: "https://example.com/x", ElicitationID: "e1"}
	}
	res, err := a.Elicit(ctx, p)
	switch {
	case errors.Is(err, ErrCannotElicit):
		return Execution{Stdout: "cannot ask: " + err.Error()}, nil
	case err != nil:
		return Execution{}, err
	}
	return Execution{Stdout: fmt.Sprintf("%s %v", res.Action, res.Content)}, nil
}

type colourHandler struct{ asked chan string }

func (h colourHandler) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.asked <- req.Params.Message
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"colour": "teal"}}}, nil
}

// TestAskerReachesTheCallingClient: an execution's Asker puts the question
// to the MCP client whose tool call started it, on its session, and gets
// its answer; a client that declared no elicitation is not asked.
func TestAskerReachesTheCallingClient(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = askingExecutor{o.Executor} })
	dial := func(opts ...mcpclient.ClientOption) *mcpclient.Client {
		t.Helper()
		tr, err := transport.NewStreamableHTTP(w.url + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := mcpclient.NewClient(tr, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, initRequest()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	h := colourHandler{asked: make(chan string, 1)}
	//lint:ignore SA1019 TypeScript SDK clients today speak 2025-11-25, where servers send elicitation/create
	text, _ := call(t, dial(mcpclient.WithElicitationHandler(h), mcpclient.WithLegacyProtocolOnly()), ToolExecuteCode, map[string]any{"code": "ask()"})
	if !strings.Contains(text, "accept map[colour:teal]") {
		t.Errorf("execute_code printed %q, want the client's answer", text)
	}
	select {
	case q := <-h.asked:
		if q != "Which colour?" {
			t.Errorf("the client was asked %q", q)
		}
	default:
		t.Error("the client's handler was not called")
	}

	//lint:ignore SA1019 as above
	text, _ = call(t, dial(mcpclient.WithLegacyProtocolOnly()), ToolExecuteCode, map[string]any{"code": "ask()"})
	if !strings.Contains(text, "cannot ask") || !strings.Contains(text, "declared no elicitation") {
		t.Errorf("without the capability: %q", text)
	}
	// mcp-go's client declares form mode only.
	//lint:ignore SA1019 as above
	text, _ = call(t, dial(mcpclient.WithElicitationHandler(h), mcpclient.WithLegacyProtocolOnly()), ToolExecuteCode, map[string]any{"code": "ask_url()"})
	if !strings.Contains(text, "did not declare URL mode") {
		t.Errorf("URL mode to a form-only client: %q", text)
	}

	// The newest protocol the face speaks with an mcp-go client.
	c := dial(mcpclient.WithElicitationHandler(h))
	text, _ = call(t, c, ToolExecuteCode, map[string]any{"code": "ask()"})
	t.Logf("default mcp-go client: protocol %s: %q", c.ProtocolVersion(), text)
	if !strings.Contains(text, "accept map[colour:teal]") {
		t.Errorf("default mcp-go client (protocol %s): %q", c.ProtocolVersion(), text)
	}
}
