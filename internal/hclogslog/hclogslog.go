// Package hclogslog sends a library's slog output (mcp-go's client
// transports and server) to the daemon's hclog logger, so that its messages
// land in the daemon's log, format and level filter, under the logger's
// name, instead of on slog's default logger.
package hclogslog

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// New returns a slog.Logger that writes to log.
func New(log hclog.Logger) *slog.Logger {
	return slog.New(&handler{log: log})
}

// Level maps a library's slog level to the daemon's, one step quieter below
// warnings: mcp-go logs routine events ("listening to server forever") at
// info, and the daemon's info level is for what operators act on. Errors
// become warnings because the daemon handles what the library reports
// (a lost upstream connection is reconnected, a broken session ended) and
// logs that itself.
func Level(l slog.Level) hclog.Level {
	switch {
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		return hclog.Debug
	default:
		return hclog.Trace
	}
}

type handler struct {
	log   hclog.Logger
	attrs []any
	group string
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.GetLevel() <= Level(l)
}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, h.key(a.Key), a.Value.Resolve().Any())
		return true
	})
	h.log.Log(Level(r.Level), r.Message, args...)
	return nil
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, h.key(a.Key), a.Value.Resolve().Any())
	}
	return &n
}

// WithGroup qualifies later keys with name, as slog's own handlers do.
func (h *handler) WithGroup(name string) slog.Handler {
	n := *h
	n.group = h.key(name)
	return &n
}

func (h *handler) key(k string) string {
	if h.group == "" {
		return k
	}
	return h.group + "." + k
}
