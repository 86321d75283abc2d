package bwrap

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cexec/cexec/internal/testutil"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// flagValue returns the arguments following each occurrence of flag.
func flagValues(args []string, flag string, n int) [][]string {
	var out [][]string
	for i := 0; i+n < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if args[i] == flag {
			out = append(out, args[i+1:i+1+n])
		}
	}
	return out
}

func TestBwrapArgs(t *testing.T) {
	t.Setenv("CEXEC_ARGS_TEST_SECRET", "do-not-pass")
	s, _ := decodeConfig(context.Background(), []byte(`{"allow_network": true}`))
	if s.python == "" {
		testutil.SkipMissing(t, "no usable python")
	}
	s.bwrapVersion = [3]int{0, 8, 0}
	ws, srv := t.TempDir(), t.TempDir()
	tests := []struct {
		name  string
		req   sandbox.CreateRequest
		check func(t *testing.T, args []string)
	}{
		{name: "isolation", req: sandbox.CreateRequest{ID: "a", Mounts: []sandbox.Mount{{Source: ws, Target: "/workspace"}, {Source: srv, Target: "/cexec/servers", ReadOnly: true}}},
			check: func(t *testing.T, args []string) {
				for _, f := range []string{"--unshare-all", "--unshare-user", "--disable-userns", "--new-session", "--die-with-parent", "--as-pid-1", "--clearenv"} {
					if !slices.Contains(args, f) {
						t.Errorf("missing %s", f)
					}
				}
				if slices.Contains(args, "--share-net") {
					t.Error("network shared without being asked for")
				}
				if v := flagValues(args, "--cap-drop", 1); len(v) != 1 || v[0][0] != "ALL" {
					t.Errorf("--cap-drop %v", v)
				}
				if v := flagValues(args, "--uid", 1); len(v) != 1 || v[0][0] != "65534" {
					t.Errorf("--uid %v", v)
				}
				if !slices.ContainsFunc(flagValues(args, "--bind", 2), func(v []string) bool { return v[0] == ws && v[1] == "/workspace" }) {
					t.Errorf("workspace not bound read-write")
				}
				if !slices.ContainsFunc(flagValues(args, "--ro-bind", 2), func(v []string) bool { return v[0] == srv && v[1] == "/cexec/servers" }) {
					t.Errorf("servers not bound read-only")
				}
				if !slices.ContainsFunc(flagValues(args, "--ro-bind", 2), func(v []string) bool { return v[0] == "/lib-dir" && v[1] == "/cexec/lib" }) {
					t.Errorf("runtime not bound read-only")
				}
				// /tmp, then /dev/shm.
				if v := flagValues(args, "--size", 1); len(v) != 2 || v[0][0] != "67108864" || v[1][0] != "67108864" {
					t.Errorf("--size %v", v)
				}
				if i := slices.Index(args, "/dev/shm"); i < 3 || args[i-1] != "--tmpfs" || args[i-3] != "--size" {
					t.Error("/dev/shm is no size-capped tmpfs")
				}
				for _, v := range flagValues(args, "--ro-bind-try", 2) {
					if v[0] == "/etc/resolv.conf" || v[0] == "/etc/passwd" || v[0] == "/etc/shadow" {
						t.Errorf("%s shown", v[0])
					}
				}
				if i := slices.Index(args, "--remount-ro"); i < 0 || args[i+1] != "/" {
					t.Error("root not read-only")
				}
			}},
		{name: "network", req: sandbox.CreateRequest{ID: "b", Network: true},
			check: func(t *testing.T, args []string) {
				if !slices.Contains(args, "--share-net") {
					t.Error("network not shared")
				}
				if !slices.ContainsFunc(flagValues(args, "--ro-bind-try", 2), func(v []string) bool { return v[0] == "/etc/resolv.conf" }) {
					t.Error("no resolv.conf with network")
				}
				if !slices.ContainsFunc(flagValues(args, "--tmpfs", 1), func(v []string) bool { return v[0] == "/workspace" }) {
					t.Error("no private /workspace without a workspace mount")
				}
			}},
		{name: "environment", req: sandbox.CreateRequest{ID: "c", Env: map[string]string{"TZ": "UTC"}},
			check: func(t *testing.T, args []string) {
				env := map[string]string{}
				for _, v := range flagValues(args, "--setenv", 2) {
					env[v[0]] = v[1]
				}
				if env["PYTHONPATH"] != "/cexec/lib:/workspace:/cexec" || env["TZ"] != "UTC" || env["HOME"] != "/tmp" {
					t.Errorf("env %v", env)
				}
				if strings.Contains(strings.Join(args, " "), "do-not-pass") {
					t.Error("the plugin's environment reached the sandbox")
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := checkRequest(s, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			sources := make([]string, len(spec.mounts))
			for i, m := range spec.mounts {
				sources[i] = m.Source
			}
			tc.check(t, bwrapArgs(s, spec, "/lib-dir", sources))
		})
	}
}
