package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// quotaSetup declares tenant "acme" with a 2 MiB disk quota and 2000
// files, and caps files at 1 MiB.
func quotaSetup(t *testing.T) setup {
	t.Helper()
	s := newSetup(t)
	appendConfig(t, s, `
sandbox {
  limits {
    max_file_size = "1MiB"
  }
}

tenant "acme" {
  disk_quota = "2MiB"
  max_files  = 2000
}

tenant "logs" {
  disk_quota = "1MiB"
}
`)
	return s
}

// TestDiskQuotaAtWriteTime: in real sandboxes, writes past a tenant's quota
// fail with ENOSPC, and 200,000 empty files stop at its files limit; the
// execution says which quota; over its bytes the tenant still runs, warned,
// and a program deletes files to get back under; with no inode left for
// cexecd's records it is refused until an operator deletes; another tenant
// keeps running; a file past max_file_size fails with EFBIG; a restart
// keeps the data.
func TestDiskQuotaAtWriteTime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("file system images need cexecd to run as root; the measured fallback has its own tests")
	}
	s := quotaSetup(t)
	d := startDaemon(t, s)
	requireSandbox(t, s)

	must(t, s, "", "exec", "--tenant", "acme", "-c", "pass")
	for _, tn := range decode[tenantList](t, must(t, s, "", "tenants", "ls", "--json")).Tenants {
		if tn.DiskMode != "image" {
			t.Fatalf("tenant %s is in %q mode", tn.ID, tn.DiskMode)
		}
	}
	const fill = `
import errno
try:
    for i in range(160):
        with open("/workspace/part%d" % i, "wb") as f:
            for _ in range(8):
                f.write(b"x" * (64 << 10))
                f.flush()
    print("wrote 80 MiB")
except OSError as e:
    print(errno.errorcode[e.errno])
`
	tests := []struct {
		name, code, want string
		cornered         bool
	}{
		{"80 MiB in 64 KiB writes", fill, "ENOSPC\n", false},
		{"200,000 empty files", `
import errno
try:
    for i in range(200000):
        open("/workspace/f%d" % i, "w").close()
    print("made 200000 files")
except OSError as e:
    print(errno.errorcode[e.errno])
`, "ENOSPC\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code, err := run(s, "", "exec", "--tenant", "acme", "-c", tc.code)
			if err != nil || code != 0 || out != tc.want || !strings.Contains(errOut, `tenant "acme" is over its disk quota`) {
				t.Fatalf("exit %d, %v\nstdout %q (want %q)\nstderr %s", code, err, out, tc.want, errOut)
			}
			// The sandbox got no more than the quota; cexecd's own lines
			// (session log, vault) may add a little.
			ls := decode[tenantList](t, must(t, s, "", "tenants", "ls", "--json"))
			for _, tn := range ls.Tenants {
				if n, _ := strconv.ParseInt(tn.DiskBytes, 10, 64); tn.ID == "acme" && n > 2<<20+64<<10 {
					t.Errorf("acme stores %d bytes with a 2 MiB quota", n)
				}
			}
			if out := must(t, s, "", "exec", "--tenant", "other", "-c", "print('other runs')"); out != "other runs\n" {
				t.Errorf("another tenant: %q", out)
			}
			if tc.cornered {
				fails(t, s, 1, `no execution can start to delete files`, "exec", "--tenant", "acme", "-c", "print(1)")
				// The operator deletes the files.
				ws := filepath.Join(s.dir, "data", "tenants", "acme", "workspace")
				if err := exec.Command("find", ws, "-maxdepth", "1", "-type", "f", "-delete").Run(); err != nil {
					t.Fatal(err)
				}
			} else {
				const clear = "import os\nfor n in os.listdir('/workspace'):\n    p = '/workspace/' + n\n    if os.path.isfile(p):\n        os.remove(p)\nprint('deleted')\n"
				if out, errOut, code, err := run(s, "", "exec", "--tenant", "acme", "-c", clear); err != nil || code != 0 || out != "deleted\n" {
					t.Fatalf("a program deleting files over the quota: exit %d, %v\n%s%s", code, err, out, errOut)
				}
			}
			if out := must(t, s, "", "exec", "--tenant", "acme", "-c", "print('runs again')"); out != "runs again\n" {
				t.Errorf("after deleting: %q", out)
			}
		})
	}

	t.Run("checkpoints fill the quota through the session log", func(t *testing.T) {
		code := `import cexec
n = 0
try:
    while n < 100:
        cexec.checkpoint("step", {"pad": "c" * (100 << 10)})
        n += 1
    print("no cap")
except Exception as e:
    print(n > 0, 'tenant "logs" is over its disk quota' in str(e))
`
		if out := must(t, s, "", "exec", "--tenant", "logs", "-c", code); out != "True True\n" {
			t.Fatalf("program output %q: want checkpoints, then the disk quota's error", out)
		}
		// Still over, it runs (its records fit in cexecd's reserve), warned.
		if out, errOut, code, err := run(s, "", "exec", "--tenant", "logs", "-c", "print(1)"); err != nil || code != 0 || out != "1\n" ||
			!strings.Contains(errOut, `tenant "logs" is over its disk quota`) {
			t.Errorf("an execution over the quota: exit %d, %v\n%s%s", code, err, out, errOut)
		}
	})

	t.Run("a file past max_file_size", func(t *testing.T) {
		code := `
import errno, os
try:
    open("/workspace/big", "wb").write(b"x" * (2 << 20))
except OSError as e:
    print(errno.errorcode[e.errno], e.strerror)
`
		if out := must(t, s, "", "exec", "--tenant", "other", "-c", code); out != "EFBIG File too large\n" {
			t.Errorf("stdout %q", out)
		}
	})

	t.Run("a restart keeps the data", func(t *testing.T) {
		must(t, s, "", "exec", "--tenant", "acme", "-c", "open('/workspace/keep', 'w').write('kept')")
		if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		<-d.exited
		startDaemon(t, s)
		if out := must(t, s, "", "exec", "--tenant", "acme", "-c", "print(open('/workspace/keep').read())"); out != "kept\n" {
			t.Errorf("after a restart: %q", out)
		}
	})
}
