package tenants

import (
	"strings"
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// TestWriteTable checks that tenants ls names the files column for what it
// shows, the limit: the API reports no count of the files in use.
func TestWriteTable(t *testing.T) {
	const header = "ID DECLARED DISK QUOTA MAX-FILES MODE RUNNING SESSIONS LAST-USED"
	tests := []struct {
		name   string
		tenant *cexecv1.TenantInfo
		want   string
	}{
		{"limits", &cexecv1.TenantInfo{Id: "acme", Declared: true, DiskBytes: 2048, DiskQuota: 1 << 30, MaxFiles: 1000, DiskMode: "image", Running: 1, Sessions: 3},
			"acme yes 2.0 KiB 1.0 GiB 1000 image 1 3 -"},
		{"no limits", &cexecv1.TenantInfo{Id: "free", DiskBytes: 10, DiskMode: "measured"},
			"free no 10 B - - measured 0 0 -"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := writeTable(&b, []*cexecv1.TenantInfo{tt.tenant}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != header || strings.Join(strings.Fields(lines[1]), " ") != tt.want {
			t.Errorf("%s: table\n%s\nwant\n%s\n%s", tt.name, b.String(), header, tt.want)
		}
	}
}
