package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestLogResultCancelled: a cancelled execution's log entry says why when
// the context knows (cexecd shutting down), else blames the client.
func TestLogResultCancelled(t *testing.T) {
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("cexecd shut down during the call"))
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"client", plain, "the execution was cancelled (the client cancelled its request or ended its session)"},
		{"shutdown", caused, "the execution was cancelled (cexecd shut down during the call)"},
	}
	for _, tt := range tests {
		r := logResult(tt.ctx, nil, tt.ctx.Err())
		if r.ErrorType != TypeCancelled || !strings.HasPrefix(r.Error, tt.want) {
			t.Errorf("%s: %+v, want %q", tt.name, r, tt.want)
		}
	}
}
