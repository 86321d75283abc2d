package mcpface

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogHandler forwards mcp-go's slog records to the daemon's hclog logger,
// so transport events land in the same stream, format and level filter as
// everything else.
type slogHandler struct {
	log   hclog.Logger
	attrs []any
}

func newSlog(log hclog.Logger) *slog.Logger { return slog.New(&slogHandler{log: log}) }

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	cur := h.log.GetLevel()
	return cur != hclog.Off && level(l) >= cur
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a.Key, a.Value.Any())
		return true
	})
	h.log.Log(level(r.Level), r.Message, args...)
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &slogHandler{log: h.log, attrs: append([]any(nil), h.attrs...)}
	for _, a := range attrs {
		n.attrs = append(n.attrs, a.Key, a.Value.Any())
	}
	return n
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	return &slogHandler{log: h.log.Named(name), attrs: h.attrs}
}

func level(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}
