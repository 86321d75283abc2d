package hclogslog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLevel(t *testing.T) {
	for _, tt := range []struct {
		in   slog.Level
		want hclog.Level
	}{
		{slog.LevelDebug - 4, hclog.Trace},
		{slog.LevelDebug, hclog.Trace},
		{slog.LevelInfo, hclog.Debug},
		{slog.LevelInfo + 2, hclog.Debug},
		{slog.LevelWarn, hclog.Warn},
		{slog.LevelError, hclog.Warn},
		{slog.LevelError + 4, hclog.Warn},
	} {
		if got := Level(tt.in); got != tt.want {
			t.Errorf("Level(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestLogger(t *testing.T) {
	for _, tt := range []struct {
		name  string
		level hclog.Level
		log   func(*slog.Logger)
		want  string // "" when nothing may be written
	}{
		{"error is a warning", hclog.Info, func(l *slog.Logger) { l.Error("lost", "server", "x") }, "[WARN]  t: lost: server=x"},
		{"info is debug", hclog.Debug, func(l *slog.Logger) { l.Info("listening") }, "[DEBUG] t: listening"},
		{"info filtered at info", hclog.Info, func(l *slog.Logger) { l.Info("listening") }, ""},
		{"off", hclog.Off, func(l *slog.Logger) { l.Error("lost") }, ""},
		{"attrs and groups", hclog.Warn, func(l *slog.Logger) { l.With("a", 1).WithGroup("g").Warn("m", "b", 2) }, "[WARN]  t: m: a=1 g.b=2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(New(hclog.New(&hclog.LoggerOptions{Name: "t", Level: tt.level, Output: &buf, DisableTime: true})))
			got := strings.TrimSpace(buf.String())
			if got != tt.want {
				t.Errorf("logged %q, want %q", got, tt.want)
			}
		})
	}
}
