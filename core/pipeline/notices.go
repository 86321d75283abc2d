package pipeline

import (
	"context"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/workspace"
)

// Bounds of the upstream log messages one execution keeps for its session
// log entry; the daemon log has them all.
const (
	maxUpstreamLogs     = 100
	maxUpstreamLogBytes = 4 << 10
)

// notices is what the program's tool calls tell the upstreams they want to
// hear: progress, when someone asked for the execution's, and log messages
// for the session log.
func (h *host) notices() *catalog.CallNotices {
	n := &catalog.CallNotices{Log: h.addLog}
	if h.progress != nil {
		n.Progress = h.progress.upstream
	}
	return n
}

func (h *host) addLog(m catalog.LogMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.logs) >= maxUpstreamLogs {
		return
	}
	l := workspace.UpstreamLog{Server: m.Server, Level: m.Level, Logger: m.Logger, Data: m.Data}
	if len(l.Data) > maxUpstreamLogBytes {
		l.Data, l.Truncated = nil, true
	}
	h.logs = append(h.logs, l)
}

// tokenizeUpstreamLog puts the upstreams' log messages of a model-facing
// execution in the form the session log keeps of the rest; a message that
// cannot be tokenized is withheld.
func tokenizeUpstreamLog(ctx context.Context, gs *guard.Session, logs []workspace.UpstreamLog) {
	for i := range logs {
		if len(logs[i].Data) == 0 {
			continue
		}
		data, err := gs.TokenizeJSON(ctx, logs[i].Data)
		if err != nil {
			logs[i].Data, logs[i].Withheld = nil, true
			continue
		}
		logs[i].Data = data
	}
}

func (h *host) upstreamLog() []workspace.UpstreamLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs
}
