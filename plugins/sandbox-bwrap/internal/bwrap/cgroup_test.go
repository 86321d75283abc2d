package bwrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetectCgroups(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		cgroup    string
		dirs      []string // directories that exist under the fake root
		files     map[string]string
		wantV2    bool
		wantDirs  map[string]string // controller -> parent cgroup, relative to the fake root
		wantErr   bool
	}{
		{
			name: "v1 hybrid",
			mountinfo: "30 25 0:26 / /R/memory rw - cgroup cgroup rw,memory\n" +
				"31 25 0:27 / /R/pids rw - cgroup cgroup rw,pids\n" +
				"32 25 0:28 / /R/unified rw - cgroup2 cgroup2 rw\n",
			cgroup:   "4:memory:/svc/a\n3:pids:/\n0::/\n",
			dirs:     []string{"R/memory/svc/a", "R/pids"},
			wantDirs: map[string]string{"memory": "R/memory/svc/a/cexec-bwrap-1", "pids": "R/pids/cexec-bwrap-1"},
		},
		{
			name:      "v1 without pids",
			mountinfo: "30 25 0:26 / /R/memory rw - cgroup cgroup rw,memory\n",
			cgroup:    "4:memory:/\n",
			dirs:      []string{"R/memory"},
			wantErr:   true,
		},
		{
			name:      "v1 container mount of its own subtree",
			mountinfo: "30 25 0:26 /docker/abc /R/memory rw - cgroup cgroup rw,memory\n31 25 0:27 /docker/abc /R/pids rw - cgroup cgroup rw,pids\n",
			cgroup:    "4:memory:/docker/abc\n3:pids:/docker/abc\n",
			dirs:      []string{"R/memory", "R/pids"},
			wantDirs:  map[string]string{"memory": "R/memory/cexec-bwrap-1", "pids": "R/pids/cexec-bwrap-1"},
		},
		{
			name:      "v2 delegated",
			mountinfo: "30 25 0:26 / /R rw - cgroup2 cgroup2 rw\n",
			cgroup:    "0::/user/app\n",
			// A real cgroupfs creates cgroup.subtree_control in new
			// directories; here it is there beforehand.
			dirs: []string{"R/user/app/cexec-bwrap-1"},
			files: map[string]string{"R/user/app/cgroup.controllers": "cpu memory pids\n", "R/user/app/cgroup.subtree_control": "",
				"R/user/app/cexec-bwrap-1/cgroup.subtree_control": ""},
			wantV2:   true,
			wantDirs: map[string]string{"": "R/user/app/cexec-bwrap-1"},
		},
		{
			name:      "v2 without the memory controller",
			mountinfo: "30 25 0:26 / /R rw - cgroup2 cgroup2 rw\n",
			cgroup:    "0::/\n",
			dirs:      []string{"R"},
			files:     map[string]string{"R/cgroup.controllers": "cpu pids\n"},
			wantErr:   true,
		},
		{name: "none", mountinfo: "1 0 0:1 / / rw - ext4 /dev/vda rw\n", cgroup: "0::/\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			proc := filepath.Join(root, "proc")
			fake := func(s string) string { return filepath.Join(root, s) }
			mi := tc.mountinfo
			// Point the mount points into the fake root.
			mi = strings.ReplaceAll(mi, " /R", " "+fake("R"))
			for p, data := range map[string]string{"proc/self/mountinfo": mi, "proc/self/cgroup": tc.cgroup} {
				must(t, os.MkdirAll(filepath.Dir(fake(p)), 0o755))
				must(t, os.WriteFile(fake(p), []byte(data), 0o644))
			}
			for _, d := range tc.dirs {
				must(t, os.MkdirAll(fake(d), 0o755))
			}
			for f, data := range tc.files {
				must(t, os.WriteFile(fake(f), []byte(data), 0o644))
			}
			fs, err := detectCgroups(proc, "cexec-bwrap-1", "")
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error, got %+v", fs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fs.v2 != tc.wantV2 || len(fs.parent) != len(tc.wantDirs) {
				t.Fatalf("got %+v", fs)
			}
			for c, d := range tc.wantDirs {
				if fs.parent[c] != fake(d) {
					t.Errorf("%s: %s, want %s", c, fs.parent[c], fake(d))
				}
				if fi, err := os.Stat(fake(d)); err != nil || !fi.IsDir() {
					t.Errorf("%s not created", d)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
