package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
)

// CallNotices hears what an upstream server says about a call while it
// runs. Either func may be nil. They are called from the connection's
// reader, so they must not block.
type CallNotices struct {
	// Progress receives the server's notifications/progress for the call;
	// the catalog asks for them (a progress token in the call's _meta)
	// only when Progress is set.
	Progress func(server, tool string, progress, total float64, message string)
	// Log receives the server's notifications/message (logging) that
	// arrive while this is the only call in flight on the connection:
	// logging is not tied to a request, and a message must not reach
	// another caller's log.
	Log func(LogMessage)
}

// LogMessage is one notifications/message of an upstream server.
type LogMessage struct {
	Server string `json:"server"`
	Level  string `json:"level"`
	Logger string `json:"logger,omitempty"`
	// Data is the message as JSON (often a string).
	Data json.RawMessage `json:"data"`
}

type noticesKey struct{}

// WithCallNotices returns ctx carrying n for the tool calls made with it.
func WithCallNotices(ctx context.Context, n *CallNotices) context.Context {
	return context.WithValue(ctx, noticesKey{}, n)
}

// CallNoticesFrom returns the CallNotices ctx carries, or nil; a catalog
// standing in for this one reads them there.
func CallNoticesFrom(ctx context.Context) *CallNotices {
	n, _ := ctx.Value(noticesKey{}).(*CallNotices)
	return n
}

// progressTokens numbers the progress tokens of upstream calls, unique in
// the daemon.
var progressTokens atomic.Uint64

// callWatch is one call in flight on a connection.
type callWatch struct {
	server, tool string
	token        string
	n            *CallNotices
}

// watches are a connection's calls in flight, for routing its
// notifications.
type watches struct {
	mu      sync.Mutex
	byToken map[string]*callWatch
	all     map[*callWatch]struct{}
}

// begin records a call; the returned func ends it. The call's request gets
// a progress token when n wants progress.
func (w *watches) begin(server, tool string, n *CallNotices, req *mcp.CallToolRequest) func() {
	cw := &callWatch{server: server, tool: tool, n: n}
	if n != nil && n.Progress != nil {
		cw.token = fmt.Sprintf("cexec-%d", progressTokens.Add(1))
		req.Params.Meta = &mcp.Meta{ProgressToken: cw.token}
	}
	w.mu.Lock()
	if w.all == nil {
		w.all, w.byToken = map[*callWatch]struct{}{}, map[string]*callWatch{}
	}
	w.all[cw] = struct{}{}
	if cw.token != "" {
		w.byToken[cw.token] = cw
	}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.all, cw)
		delete(w.byToken, cw.token)
		w.mu.Unlock()
	}
}

// handle routes a progress or logging notification of server; it reports
// whether n was one.
func (w *watches) handle(server string, log hclog.Logger, mask *secretMask, n mcp.JSONRPCNotification) bool {
	switch n.Method {
	case string(mcp.MethodNotificationProgress):
		w.progress(mask, n)
	case string(mcp.MethodNotificationMessage):
		w.logMessage(server, log, mask, n)
	default:
		return false
	}
	return true
}

func (w *watches) progress(mask *secretMask, n mcp.JSONRPCNotification) {
	f := n.Params.AdditionalFields
	token := fmt.Sprint(f["progressToken"])
	w.mu.Lock()
	cw := w.byToken[token]
	w.mu.Unlock()
	if cw == nil {
		return
	}
	progress, _ := f["progress"].(float64)
	total, _ := f["total"].(float64)
	msg, _ := f["message"].(string)
	cw.n.Progress(cw.server, cw.tool, progress, total, mask.string(msg))
}

// logMessage writes an upstream's log message to the daemon log, at the
// nearest level, and gives it to the one call in flight, if there is one.
func (w *watches) logMessage(server string, log hclog.Logger, mask *secretMask, n mcp.JSONRPCNotification) {
	f := n.Params.AdditionalFields
	m := LogMessage{Server: server}
	m.Level, _ = f["level"].(string)
	m.Logger, _ = f["logger"].(string)
	m.Data, _ = json.Marshal(f["data"])
	m.Logger, m.Data = mask.string(m.Logger), mask.raw(m.Data)
	log.Log(hclogLevel(m.Level), "upstream log message", "server", server, "level", m.Level, "logger", m.Logger, "data", string(m.Data))
	w.mu.Lock()
	var only *callWatch
	if len(w.all) == 1 {
		for cw := range w.all {
			only = cw
		}
	}
	w.mu.Unlock()
	if only != nil && only.n != nil && only.n.Log != nil {
		only.n.Log(m)
	}
}

// hclogLevel maps an MCP (syslog) level to the daemon log's.
func hclogLevel(level string) hclog.Level {
	switch strings.ToLower(level) {
	case "debug":
		return hclog.Debug
	case "info", "notice":
		return hclog.Info
	case "warning":
		return hclog.Warn
	case "error", "critical", "alert", "emergency":
		return hclog.Error
	}
	return hclog.Info
}
