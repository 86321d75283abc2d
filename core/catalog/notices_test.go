package catalog

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/internal/testutil"
)

// TestCallNotices calls the real server-everything: its long-running tool's
// progress reaches the call's Progress, and the log message it sends as
// simulated logging starts reaches the call's Log and the daemon log.
func TestCallNotices(t *testing.T) {
	logs := &testutil.Buffer{}
	c := start(t, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})}, everythingServer(t, nil))

	var mu sync.Mutex
	var progress []string
	var messages []LogMessage
	ctx := WithCallNotices(context.Background(), &CallNotices{
		Progress: func(server, tool string, p, total float64, _ string) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, server+"/"+tool+" "+formatFloat(p)+"/"+formatFloat(total))
		},
		Log: func(m LogMessage) {
			mu.Lock()
			defer mu.Unlock()
			messages = append(messages, m)
		},
	})
	if _, err := c.Call(ctx, "default", "everything", "trigger-long-running-operation", json.RawMessage(`{"duration": 0.2, "steps": 2}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(progress, ", ")
	mu.Unlock()
	if want := "everything/trigger-long-running-operation 1/2, everything/trigger-long-running-operation 2/2"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}

	// On, then off: the server logs once, during the first call.
	for range 2 {
		if _, err := c.Call(ctx, "default", "everything", "toggle-simulated-logging", nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(messages) != 1 || messages[0].Server != "everything" || messages[0].Level == "" || !strings.Contains(string(messages[0].Data), "message") {
		t.Errorf("log messages %+v, want the one of simulated logging", messages)
	}
	if !strings.Contains(logs.String(), "upstream log message: server=everything") {
		t.Errorf("the daemon log lacks the upstream's message:\n%s", logs)
	}
}

func formatFloat(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// TestWatchesLogAttribution: a log message goes to the call in flight only
// when it is the only one, since logging names no request.
func TestWatchesLogAttribution(t *testing.T) {
	note := mcp.JSONRPCNotification{Notification: mcp.Notification{Method: string(mcp.MethodNotificationMessage),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"level": "info", "data": "hello"}}}}
	var w watches
	var a, b int
	na := &CallNotices{Log: func(LogMessage) { a++ }}
	nb := &CallNotices{Log: func(LogMessage) { b++ }}
	log := hclog.NewNullLogger()

	endA := w.begin("s", "t", na, &mcp.CallToolRequest{})
	w.handle("s", log, nil, note)
	endB := w.begin("s", "t", nb, &mcp.CallToolRequest{})
	w.handle("s", log, nil, note)
	endA()
	w.handle("s", log, nil, note)
	endB()
	w.handle("s", log, nil, note)
	if a != 1 || b != 1 {
		t.Errorf("deliveries a=%d b=%d, want 1 each (alone in flight)", a, b)
	}
}

// TestWatchesProgressToken: only a call that wants progress carries a
// token, and a notification reaches the call whose token it names.
func TestWatchesProgressToken(t *testing.T) {
	var w watches
	var got []string
	n := &CallNotices{Progress: func(_, tool string, p, _ float64, msg string) { got = append(got, tool+":"+msg) }}
	plain, wants := &mcp.CallToolRequest{}, &mcp.CallToolRequest{}
	w.begin("s", "plain", &CallNotices{}, plain)
	end := w.begin("s", "wants", n, wants)
	if plain.Params.Meta != nil {
		t.Errorf("a call without Progress got _meta %+v", plain.Params.Meta)
	}
	if wants.Params.Meta == nil || wants.Params.Meta.ProgressToken == nil {
		t.Fatal("a call with Progress got no progress token")
	}
	progress := func(token any, msg string) mcp.JSONRPCNotification {
		return mcp.JSONRPCNotification{Notification: mcp.Notification{Method: string(mcp.MethodNotificationProgress),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"progressToken": token, "progress": 1.0, "message": msg}}}}
	}
	w.handle("s", hclog.NewNullLogger(), nil, progress(wants.Params.Meta.ProgressToken, "mine"))
	w.handle("s", hclog.NewNullLogger(), nil, progress("cexec-0", "another's"))
	end()
	w.handle("s", hclog.NewNullLogger(), nil, progress(wants.Params.Meta.ProgressToken, "late"))
	if strings.Join(got, ",") != "wants:mine" {
		t.Errorf("progress delivered %v, want [wants:mine]", got)
	}
}
