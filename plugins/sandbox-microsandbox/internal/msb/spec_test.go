package msb

import (
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestZygoteMemoryKills: the zygote in a microVM counts the guest kernel's
// OOM kills in /proc/vmstat and names the VM's memory as the limit, the
// request's or the backend's default.
func TestZygoteMemoryKills(t *testing.T) {
	s := &settings{python: "/usr/bin/python3", memoryMB: defaultMemoryMB}
	for _, tt := range []struct {
		name   string
		limits sandbox.Limits
		want   string
	}{
		{"limit asked for", sandbox.Limits{MemoryBytes: 300 << 20}, "--memory-events /proc/vmstat --memory-limit 314572800"},
		{"backend's default", sandbox.Limits{}, "--memory-events /proc/vmstat --memory-limit 536870912"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sp, _, err := checkRequest(s, sandbox.CreateRequest{ID: "a", Limits: tt.limits})
			if err != nil {
				t.Fatal(err)
			}
			zc := zygoteConfig(s, guestLib, nil, true, sp)
			if cmd := strings.Join(zc.Command(), " "); !strings.Contains(cmd, tt.want) {
				t.Errorf("zygote command %q lacks %q", cmd, tt.want)
			}
		})
	}
}
