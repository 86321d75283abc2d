package control

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/pluginapi"
)

type fakePool struct {
	st  PoolState
	err error
}

func (f fakePool) PoolState(context.Context) (PoolState, error) { return f.st, f.err }

func TestPoolStatus(t *testing.T) {
	used := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name string
		pool Pool
		code codes.Code
		want *cexecv1.PoolStatusResponse
	}{
		{name: "no backend", pool: nil, code: codes.FailedPrecondition},
		{name: "backend error", pool: fakePool{err: fmt.Errorf("list: %w", pluginapi.ErrPluginShutdown)}, code: codes.Unavailable},
		{
			name: "sandboxes sorted by tenant and id",
			pool: fakePool{st: PoolState{
				Backend: "bwrap", Idle: map[string]int{"alice": 1}, Busy: 2, Creating: 1, MaxTotal: 16, Warm: 2,
				Targets: map[string]int{"alice": 3, "bob": 8},
				Sandboxes: []PoolSandbox{
					{ID: "sbx-bob-2", Tenant: "bob", Busy: true, Fresh: true},
					{ID: "sbx-bob-1", Tenant: "bob", Busy: true, Uses: 7, LastUsed: used, Created: used.Add(-time.Minute), RSSBytes: 12 << 20},
					{ID: "sbx-alice-1", Tenant: "alice", Uses: 1, LastUsed: used, RSSBytes: 11 << 20},
				},
			}},
			want: &cexecv1.PoolStatusResponse{
				Backend: "bwrap", Idle: map[string]int32{"alice": 1}, Busy: 2, Creating: 1, MaxTotal: 16, Warm: 2,
				Targets: map[string]int32{"alice": 3, "bob": 8},
				Sandboxes: []*cexecv1.PoolSandbox{
					{Id: "sbx-alice-1", Tenant: "alice", State: "idle", Uses: 1, LastUsedUnixMs: used.UnixMilli(), RssBytes: 11 << 20},
					{Id: "sbx-bob-1", Tenant: "bob", State: "busy", Uses: 7, LastUsedUnixMs: used.UnixMilli(),
						CreatedUnixMs: used.Add(-time.Minute).UnixMilli(), RssBytes: 12 << 20},
					{Id: "sbx-bob-2", Tenant: "bob", State: "busy", Fresh: true},
				},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Deps{Plugins: fakePlugins{}, Config: fakeConfig{}}
			if tc.pool != nil {
				d.Pool = tc.pool
			}
			r, err := serve(t, d).PoolStatus(context.Background(), &cexecv1.PoolStatusRequest{})
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.want == nil {
				return
			}
			if !proto.Equal(r, tc.want) {
				t.Errorf("got  %v\nwant %v", r, tc.want)
			}
		})
	}
}
