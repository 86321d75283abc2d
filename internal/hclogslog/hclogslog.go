// Package hclogslog sends a library's slog output (mcp-go's client
// transports and server) to the daemon's hclog logger, so that its messages
// land in the daemon's log, format and level filter, under the logger's
// name, instead of on slog's default logger.
package hclogslog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// New returns a slog.Logger that writes to log.
func New(log hclog.Logger) *slog.Logger {
	return slog.New(&handler{log: log})
}

// NewRedacting is New with r applied to the message and to every string
// and error value, so that a secret the library prints (a url with a key
// in it) is masked.
func NewRedacting(log hclog.Logger, r *strings.Replacer) *slog.Logger {
	return slog.New(&handler{log: log, redact: r})
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
	log    hclog.Logger
	attrs  []any
	group  string
	redact *strings.Replacer
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.GetLevel() <= Level(l)
}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, h.key(a.Key), h.value(a.Value))
		return true
	})
	msg := r.Message
	if h.redact != nil {
		msg = h.redact.Replace(msg)
	}
	h.log.Log(Level(r.Level), msg, args...)
	return nil
}

func (h *handler) value(v slog.Value) any {
	a := v.Resolve().Any()
	if h.redact == nil {
		return a
	}
	switch x := a.(type) {
	case string:
		return h.redact.Replace(x)
	case error:
		return h.redact.Replace(x.Error())
	case fmt.Stringer:
		return h.redact.Replace(x.String())
	}
	return a
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, h.key(a.Key), h.value(a.Value))
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
