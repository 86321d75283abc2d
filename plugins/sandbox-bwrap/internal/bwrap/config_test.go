package bwrap

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi"
)

func TestDecodeConfig(t *testing.T) {
	if _, err := os.Stat(defaultPython); err != nil {
		testutil.SkipMissing(t, "no %s", defaultPython)
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "py")
	if err := os.Symlink(defaultPython, link); err != nil {
		t.Fatal(err)
	}
	realPython, _ := filepath.EvalSymlinks(defaultPython)
	tests := []struct {
		name    string
		config  string
		errAttr string // attribute of the expected error diagnostic
		check   func(t *testing.T, s *settings)
	}{
		{name: "defaults", config: `{}`, check: func(t *testing.T, s *settings) {
			if s.python != realPython || s.memory != 512<<20 || s.pids != 128 || s.timeout != 30*time.Second ||
				s.output != 1<<20 || s.tmp != 64<<20 || !s.cgroups || s.allowNetwork {
				t.Errorf("settings %+v", s)
			}
		}},
		{name: "null", config: `null`},
		{name: "symlinked python resolved", config: `{"python": "` + link + `"}`, check: func(t *testing.T, s *settings) {
			if s.python != realPython {
				t.Errorf("python %q, want %q", s.python, realPython)
			}
		}},
		{name: "shim refused", config: `{"python": "` + shim + `"}`, errAttr: "python"},
		{name: "missing python", config: `{"python": "/nonexistent/python3"}`, errAttr: "python"},
		{name: "values", config: `{"memory_mb": 256, "pids": 32, "exec_timeout": "5s", "output_kb": 64, "tmp_mb": 8, "cpus": 0.5, "cgroups": "off", "allow_network": true, "preload": ["json", "os.path"]}`,
			check: func(t *testing.T, s *settings) {
				if s.memory != 256<<20 || s.pids != 32 || s.timeout != 5*time.Second || s.output != 64<<10 || s.tmp != 8<<20 ||
					s.cpusMilli != 500 || s.cgroups || !s.allowNetwork || strings.Join(s.preload, ",") != "json,os.path" {
					t.Errorf("settings %+v", s)
				}
			}},
		{name: "bad timeout", config: `{"exec_timeout": "soon"}`, errAttr: "exec_timeout"},
		{name: "negative memory", config: `{"memory_mb": -1}`, errAttr: "memory_mb"},
		{name: "bad cgroups", config: `{"cgroups": "v3"}`, errAttr: "cgroups"},
		{name: "allowed uids", config: `{"allowed_uids": "200000-265535", "shm_mb": 16}`, check: func(t *testing.T, s *settings) {
			if s.allowedUIDs == nil || *s.allowedUIDs != [2]uint32{200000, 265535} || s.shm != 16<<20 {
				t.Errorf("allowed uids %v, shm %d", s.allowedUIDs, s.shm)
			}
		}},
		{name: "allowed uids with root", config: `{"allowed_uids": "0-100"}`, errAttr: "allowed_uids"},
		{name: "allowed uids reversed", config: `{"allowed_uids": "300-200"}`, errAttr: "allowed_uids"},
		{name: "allowed uids not a range", config: `{"allowed_uids": "200000"}`, errAttr: "allowed_uids"},
		{name: "negative shm", config: `{"shm_mb": -1}`, errAttr: "shm_mb"},
		{name: "bad module", config: `{"preload": ["os; import x"]}`, errAttr: "preload"},
		{name: "ro path over the system", config: `{"ro_paths": ["/etc"]}`, errAttr: "ro_paths"},
		{name: "unknown attribute", config: `{"pythn": "x"}`, errAttr: "pythn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, diags := decodeConfig(context.Background(), json.RawMessage(tc.config))
			var errs pluginapi.Diagnostics
			for _, d := range diags {
				if d.Severity == pluginapi.SeverityError {
					errs = append(errs, d)
				}
			}
			switch {
			case tc.errAttr == "" && tc.name != "unknown attribute" && len(errs) > 0:
				t.Fatalf("unexpected errors: %v", errs)
			case (tc.errAttr != "" || tc.name == "unknown attribute") && (len(errs) != 1 || errs[0].Attribute != tc.errAttr):
				t.Fatalf("errors %+v, want one about %q", errs, tc.errAttr)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	tests := []struct {
		v    [3]int
		want bool
	}{{[3]int{0, 8, 0}, true}, {[3]int{0, 7, 9}, false}, {[3]int{1, 0, 0}, true}, {[3]int{0, 8, 1}, true}}
	for _, tc := range tests {
		if got := versionAtLeast(tc.v, 0, 8, 0); got != tc.want {
			t.Errorf("%v >= 0.8.0: %v", tc.v, got)
		}
	}
}

func TestConfigureAPIVersion(t *testing.T) {
	for _, v := range []string{"", "v0", "v2"} {
		diags, err := New(nil).Configure(t.Context(), nil, v)
		if err != nil || !diags.HasErrors() || diags[0].Summary != "Unsupported sandbox API version" {
			t.Errorf("Configure with API version %q = %+v, %v; want an error diagnostic", v, diags, err)
		}
	}
}
