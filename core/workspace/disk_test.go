package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace/diskimage"
	"github.com/cexec/cexec/internal/testutil"
)

// imageDataDir is a data dir the sandbox user (nobody) can reach.
func imageDataDir(t *testing.T) string {
	t.Helper()
	if err := diskimage.Supported(); err != nil {
		testutil.SkipMissing(t, "file system images: %v", err)
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// imageManager is a Manager in image mode whose sandbox user is nobody.
func imageManager(t *testing.T, dataDir string, tenants ...*config.Tenant) *Manager {
	t.Helper()
	m := newManager(t, Options{DataDir: dataDir, Tenants: tenants, DiskImages: true, Owner: &Owner{UID: 65534, GID: 65534}})
	if !m.images {
		t.Fatal("the manager fell back to measured quotas")
	}
	return m
}

// sandboxed runs a Python program in dir as nobody, as sandboxed code
// would, and returns its output.
func sandboxed(t *testing.T, dir, program string) string {
	t.Helper()
	testutil.NeedPython(t)
	cmd := exec.Command("/usr/bin/python3", "-c", program)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// fill writes until the disk says no, like a runaway program.
const fill = `
import errno
try:
    with open("big", "wb") as f:
        for _ in range(80 * 16):
            f.write(b"x" * 65536)
            f.flush()
    print("wrote 80 MiB")
except OSError as e:
    print("OSError", errno.errorcode[e.errno])
`

func TestImageQuotaHoldsAtWriteTime(t *testing.T) {
	tests := []struct {
		name     string
		tenant   config.Tenant
		program  string
		wantErr  string // what the program sees
		wantQuot string // what the quota error says
		// cornered: no inode is left for cexecd's records, so nothing starts
		// until an operator deletes files; else programs still run.
		cornered bool
	}{
		{"bytes", config.Tenant{ID: "acme", DiskQuota: 2 << 20}, fill, "OSError ENOSPC",
			`tenant "acme" is over its disk quota: 2.0 MiB of 2.0 MiB used`, false},
		{"files", config.Tenant{ID: "acme", DiskQuota: 64 << 20, MaxFiles: 2000}, `
import errno
try:
    for i in range(200000):
        open("f%d" % i, "w").close()
except OSError as e:
    print("OSError", errno.errorcode[e.errno], i)
`, "OSError ENOSPC", `of 2000 files`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tn := tc.tenant
			m := imageManager(t, imageDataDir(t), &tn)
			acme, other := mustTenant(t, m, "acme"), mustTenant(t, m, "other")
			run, err := acme.Begin("s1")
			if err != nil {
				t.Fatal(err)
			}
			out := sandboxed(t, acme.WorkspaceDir(), tc.program)
			if !strings.Contains(out, tc.wantErr) {
				t.Fatalf("program: %s, want %s", out, tc.wantErr)
			}
			e, err := run.Finish(Entry{Code: "fill()"})
			if !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(e.Quota, tc.wantQuot) {
				t.Fatalf("Finish = %v, entry quota %q; want ErrQuotaExceeded naming the quota", err, e.Quota)
			}
			// What to do: cornered, no program can delete the files.
			if want := map[bool]string{true: "an operator must delete files", false: "to run again"}[tc.cornered]; !strings.Contains(e.Quota, want) {
				t.Errorf("entry quota %q, want it to say %q", e.Quota, want)
			}
			used, _ := acme.DiskUsage()
			lim := acme.Quota().limits()
			t.Logf("%s: program says %q; used %d bytes of %d (+%d reserve)", tc.name, strings.TrimSpace(out), used, lim.Bytes, lim.Reserve)
			if used > lim.Bytes+lim.Reserve {
				t.Errorf("the tenant uses %d bytes, past its quota and reserve", used)
			}
			// The session log took the execution's entry, quota line and all.
			entries, err := acme.ReadSession("s1")
			if err != nil || len(entries.Entries) != 1 || entries.Entries[0].Quota == "" {
				t.Fatalf("session log = %+v, %v", entries, err)
			}
			// Over quota it still runs, for a program to delete files, and
			// says so at its end; cornered, it is refused; another tenant runs.
			over, err := acme.Begin("")
			switch {
			case tc.cornered:
				if !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), tc.wantQuot) || !strings.Contains(err.Error(), "no execution can start") {
					t.Fatalf("Begin cornered = %v, want a refusal saying why", err)
				}
			case err != nil:
				t.Fatalf("Begin over quota = %v, want it to run", err)
			default:
				if _, err := over.Finish(Entry{}); !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), tc.wantQuot) {
					t.Fatalf("Finish over quota = %v", err)
				}
			}
			if run, err := other.Begin(""); err != nil {
				t.Fatalf("another tenant: %v", err)
			} else if _, err := run.Finish(Entry{}); err != nil {
				t.Fatal(err)
			}
			// Under again after deleting.
			if out := sandboxed(t, acme.WorkspaceDir(), "import os\nfor n in os.listdir('.'):\n    n not in ('state', 'skills') and os.remove(n)"); out != "" {
				t.Fatal(out)
			}
			run, err = acme.Begin("")
			if err != nil {
				t.Fatalf("Begin after deleting: %v", err)
			}
			if _, err := run.Finish(Entry{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestImageCountsSessionLogsAndVaults(t *testing.T) {
	dataDir := imageDataDir(t)
	m := imageManager(t, dataDir, &config.Tenant{ID: "acme", DiskQuota: 2 << 20})
	acme := mustTenant(t, m, "acme")
	before, _ := acme.DiskUsage()
	// A vault lives in the tenant's folder, so in its image.
	vault := filepath.Join(dataDir, "tenants", "acme", "vaults")
	if err := os.MkdirAll(vault, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vault, "s1.json"), make([]byte, 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if after, _ := acme.DiskUsage(); after < before+256<<10 {
		t.Errorf("a 256 KiB vault took usage from %d to %d", before, after)
	}
	// Checkpoints fill the quota through the session log until refused.
	ctx := json.RawMessage(`"` + strings.Repeat("x", 200<<10) + `"`)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = acme.Append("s1", Entry{Kind: KindCheckpoint, Step: "s", Context: ctx})
	}
	if !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), `tenant "acme" is over its disk quota`) {
		t.Fatalf("checkpoints past the quota: %v", err)
	}
	used, _ := acme.DiskUsage()
	if lim := acme.Quota().limits(); used > lim.Bytes+lim.Reserve {
		t.Errorf("used %d, past quota %d and reserve %d", used, lim.Bytes, lim.Reserve)
	}
	// Over its quota the tenant still runs, for a program to delete files,
	// and the end of each execution says so.
	run, err := acme.Begin("")
	if err != nil {
		t.Fatalf("Begin after the log filled the quota = %v, want it to run", err)
	}
	if _, err := run.Finish(Entry{}); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("Finish over the quota = %v, want ErrQuotaExceeded", err)
	}
	// Once cexecd's own reserve is half gone (root fills it here), nothing
	// starts: its records would not fit.
	f, err := os.Create(filepath.Join(dataDir, "tenants", "acme", "workspace", "root-fill"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 64<<10))
	}
	_ = f.Close()
	if _, err := acme.Begin(""); !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), "no execution can start") {
		t.Fatalf("Begin with the reserve used up = %v", err)
	}
}

func TestImageSurvivesRestartAndGC(t *testing.T) {
	dataDir := imageDataDir(t)
	clk := newClock()
	m1, err := New(Options{DataDir: dataDir, DiskImages: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustTenant(t, m1, "gone").SaveState("keep.json", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	// A second daemon on a mount the first left (a crash) reuses it.
	m2, err := New(Options{DataDir: dataDir, DiskImages: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := mustTenant(t, m2, "gone").GetState("keep.json"); err != nil || string(v) != `{"a":1}` {
		t.Fatalf("state after reusing the mount = %s, %v", v, err)
	}
	for _, m := range []*Manager{m2, m1} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(dataDir, "tenants", "gone")
	if ok, _ := diskimage.Mounted(filepath.Join(dataDir, "images", "gone.img"), dir); ok {
		t.Fatal("Close left the image mounted")
	}
	// A clean restart mounts it again.
	m3 := newManager(t, Options{DataDir: dataDir, DiskImages: true, Now: clk.Now})
	if v, err := mustTenant(t, m3, "gone").GetState("keep.json"); err != nil || string(v) != `{"a":1}` {
		t.Fatalf("state after a restart = %s, %v", v, err)
	}
	list, err := m3.Tenants(context.Background())
	if err != nil || len(list) != 1 || list[0].DiskMode != DiskModeImage {
		t.Fatalf("Tenants = %+v, %v", list, err)
	}
	clk.Advance(48 * 3600e9)
	if gc, err := m3.GC(context.Background(), 3600e9, false); err != nil || len(gc) != 1 {
		t.Fatalf("GC = %+v, %v", gc, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "images", "gone.img")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("GC left the image: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("GC left the folder: %v", err)
	}
}

func TestImageTakesOverAnOlderFolderAndFollowsTheQuota(t *testing.T) {
	dataDir := imageDataDir(t)
	old := newManager(t, Options{DataDir: dataDir})
	if _, err := mustTenant(t, old, "acme").SaveState("keep.json", json.RawMessage(`[1]`)); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	for _, quota := range []int64{4 << 20, 16 << 20, 3 << 20} {
		m, err := New(Options{DataDir: dataDir, DiskImages: true, Tenants: []*config.Tenant{{ID: "acme", DiskQuota: quota, MaxFiles: 1000}}})
		if err != nil {
			t.Fatal(err)
		}
		acme := mustTenant(t, m, "acme")
		if v, err := acme.GetState("keep.json"); err != nil || string(v) != `[1]` || acme.DiskMode() != DiskModeImage {
			t.Fatalf("quota %d: state %s, %v, mode %s", quota, v, err, acme.DiskMode())
		}
		u, err := diskimage.UsageOf(acme.dir)
		if err != nil || !diskimage.Fits(u, acme.Quota().limits()) {
			t.Errorf("quota %d: usage %+v, %v", quota, u, err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMeasuredModeWithoutImages(t *testing.T) {
	m := newManager(t, Options{Tenants: []*config.Tenant{{ID: "acme", DiskQuota: 1 << 10}}})
	acme := mustTenant(t, m, "acme")
	if acme.DiskMode() != DiskModeMeasured {
		t.Fatalf("mode %s", acme.DiskMode())
	}
	writeFile(t, filepath.Join(acme.WorkspaceDir(), "big"), make([]byte, 4<<10))
	if _, err := acme.CheckQuota(); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatal(err)
	}
	if _, err := acme.Begin(""); !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), `tenant "acme" is over its disk quota: 4.0 KiB of 1.0 KiB used`) {
		t.Fatalf("Begin over a measured quota = %v", err)
	}
}

// TestImageNearQuotaWarns: ext4 fails a large write whole when less than
// it is free, so the execution's end says the tenant is at its quota even
// though a little is left.
func TestImageNearQuotaWarns(t *testing.T) {
	m := imageManager(t, imageDataDir(t), &config.Tenant{ID: "acme", DiskQuota: 2 << 20})
	acme := mustTenant(t, m, "acme")
	run, err := acme.Begin("")
	if err != nil {
		t.Fatal(err)
	}
	out := sandboxed(t, acme.WorkspaceDir(), `
import errno
try:
    for i in range(160):
        with open("part%d" % i, "wb") as f:
            f.write(b"x" * (512 << 10))
except OSError as e:
    print("OSError", errno.errorcode[e.errno])
`)
	if !strings.Contains(out, "OSError ENOSPC") {
		t.Fatalf("program: %s", out)
	}
	if e, err := run.Finish(Entry{}); !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(e.Quota, "No space left on device") {
		t.Fatalf("Finish = %v, entry quota %q", err, e.Quota)
	}
}
