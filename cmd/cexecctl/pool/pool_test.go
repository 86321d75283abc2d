package pool

import (
	"bytes"
	"strings"
	"testing"
	"time"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

func TestRender(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	for _, tc := range []struct {
		name string
		r    *cexecv1.PoolStatusResponse
		want []string
		not  []string
	}{
		{
			name: "empty pool",
			r:    &cexecv1.PoolStatusResponse{Backend: "bwrap", MaxTotal: 16, Warm: 2},
			want: []string{"backend    bwrap\n", "sandboxes  0 of 16: 0 idle, 0 busy, 0 creating\n", "warm       2 idle per active tenant"},
			not:  []string{"TENANT", "SANDBOX"},
		},
		{
			name: "two tenants",
			r: &cexecv1.PoolStatusResponse{
				Backend: "bwrap", MaxTotal: 16, Warm: 2, Busy: 1, Creating: 1,
				Idle:    map[string]int32{"alice": 2},
				Targets: map[string]int32{"alice": 3, "bob": 8},
				Sandboxes: []*cexecv1.PoolSandbox{
					{Id: "sbx-alice-1", Tenant: "alice", State: "idle", Uses: 4, RssBytes: 10 << 20, LastUsedUnixMs: 997_000},
					{Id: "sbx-alice-2", Tenant: "alice", State: "idle"},
					{Id: "sbx-bob-1", Tenant: "bob", State: "busy", Fresh: true, Uses: 0, RssBytes: 3 << 19, LastUsedUnixMs: 1_000_000},
				},
			},
			want: []string{
				"sandboxes  4 of 16: 2 idle, 1 busy, 1 creating\n",
				"alice   2     0     3\n",
				"bob     0     1     8\n",
				"sbx-alice-1  alice   idle          4     10.0 MiB  3s ago\n",
				"sbx-alice-2  alice   idle          0     -         -\n",
				"sbx-bob-1    bob     busy (fresh)  0     1.5 MiB   0s ago\n",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render(&b, tc.r, now); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("output has %q:\n%s", w, b.String())
				}
			}
		})
	}
}
