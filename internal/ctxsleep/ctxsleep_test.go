package ctxsleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"waits", context.Background(), time.Millisecond, nil},
		{"nothing to wait", context.Background(), 0, nil},
		{"ctx ended", ended, time.Hour, context.Canceled},
		{"ctx ended, nothing to wait", ended, -1, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := Sleep(tt.ctx, tt.d); !errors.Is(err, tt.want) {
				t.Errorf("Sleep(%s) = %v, want %v", tt.d, err, tt.want)
			}
		})
	}
}
