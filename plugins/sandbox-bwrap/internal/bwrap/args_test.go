package bwrap

import (
	"context"
	"os"
	"path/filepath"
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
				// Over the interpreter, so after the system directories.
				binds := flagValues(args, "--ro-bind", 2)
				over := slices.IndexFunc(binds, func(v []string) bool { return v[0] == "/interp-copy" && v[1] == s.python })
				if over < 0 || slices.ContainsFunc(binds[over:], func(v []string) bool { return strings.HasPrefix(s.python, v[1]+"/") }) {
					t.Errorf("the execute-only interpreter is not bound over %s: %v", s.python, binds)
				}
				// /tmp, then /dev/shm.
				if v := flagValues(args, "--size", 1); len(v) != 2 || v[0][0] != "67108864" || v[1][0] != "67108864" {
					t.Errorf("--size %v", v)
				}
				if i := slices.Index(args, "/dev/shm"); i < 3 || args[i-1] != "--tmpfs" || args[i-3] != "--size" {
					t.Error("/dev/shm is no size-capped tmpfs")
				}
				if !slices.ContainsFunc(flagValues(args, "--ro-bind", 2), func(v []string) bool { return v[0] == "/etc-dir" && v[1] == "/etc" }) {
					t.Errorf("/etc is not the copy")
				}
				// Nothing of the host's /etc is bound but resolv.conf for
				// networked sandboxes.
				for _, op := range []string{"--ro-bind", "--ro-bind-try", "--bind"} {
					for _, v := range flagValues(args, op, 2) {
						if strings.HasPrefix(v[0], "/etc") && v[0] != "/etc-dir" {
							t.Errorf("%s %s shown", op, v[0])
						}
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
				if env["PYTHONPATH"] != "/cexec/lib" || env["CEXEC_PATH"] != "/workspace:/cexec" || env["TZ"] != "UTC" || env["HOME"] != "/tmp" {
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
			tc.check(t, bwrapArgs(s, spec, boxDirs{lib: "/lib-dir", etc: "/etc-dir", interp: "/interp-copy"}, sources))
		})
	}
}

// TestCheckRunAs checks the host users a request may name: never root,
// within allowed_uids when set, and only the plugin's own user when the
// plugin is not root.
func TestCheckRunAs(t *testing.T) {
	root := &settings{runAs: &[2]uint32{65534, 65534}}
	bounded := &settings{runAs: &[2]uint32{65534, 65534}, allowedUIDs: &[2]uint32{200000, 200009}}
	unprivileged := &settings{}
	own := &sandbox.HostUser{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	tests := []struct {
		name  string
		s     *settings
		runAs *sandbox.HostUser
		want  *[2]uint32 // nil: refused, unless def
		def   bool       // the plugin's default user
	}{
		{"root plugin, tenant user", root, &sandbox.HostUser{UID: 200001, GID: 200001}, &[2]uint32{200001, 200001}, false},
		{"root plugin, no user", root, nil, &[2]uint32{65534, 65534}, false},
		{"root plugin, root asked", root, &sandbox.HostUser{UID: 0, GID: 0}, nil, false},
		{"root plugin, root group asked", root, &sandbox.HostUser{UID: 200001, GID: 0}, nil, false},
		{"within allowed_uids", bounded, &sandbox.HostUser{UID: 200009, GID: 200009}, &[2]uint32{200009, 200009}, false},
		{"outside allowed_uids", bounded, &sandbox.HostUser{UID: 1000, GID: 1000}, nil, false},
		{"gid outside allowed_uids", bounded, &sandbox.HostUser{UID: 200001, GID: 1000}, nil, false},
		{"unprivileged plugin, its own user", unprivileged, own, nil, true},
		{"unprivileged plugin, another user", unprivileged, &sandbox.HostUser{UID: own.UID + 1, GID: own.GID + 1}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.def && own.UID == 0 {
				t.Skip("the test runs as root, which no request may name")
			}
			spec, err := checkRequest(tt.s, sandbox.CreateRequest{ID: "a", RunAs: tt.runAs})
			switch {
			case tt.want == nil && !tt.def:
				if err == nil {
					t.Fatalf("accepted, runs as %v", spec.runAs)
				}
			case err != nil:
				t.Fatal(err)
			case tt.def && spec.runAs != nil:
				t.Errorf("runs as %v, want the plugin's own user", *spec.runAs)
			case tt.want != nil && (spec.runAs == nil || *spec.runAs != *tt.want):
				t.Errorf("runs as %v, want %v", spec.runAs, *tt.want)
			}
		})
	}
}

// TestInterpreterBoundLast: a read-only path that holds the interpreter
// (one outside /usr, say) must not hide its execute-only copy.
func TestInterpreterBoundLast(t *testing.T) {
	s, _ := decodeConfig(context.Background(), []byte(`{}`))
	if s.python == "" {
		testutil.SkipMissing(t, "no usable python")
	}
	s.roPaths = []string{filepath.Dir(s.python)}
	spec, err := checkRequest(s, sandbox.CreateRequest{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	binds := flagValues(bwrapArgs(s, spec, boxDirs{lib: "/lib-dir", etc: "/etc-dir", interp: "/interp-copy"}, nil), "--ro-bind", 2)
	over := slices.IndexFunc(binds, func(v []string) bool { return v[0] == "/interp-copy" && v[1] == s.python })
	if over < 0 || slices.ContainsFunc(binds[over:], func(v []string) bool { return strings.HasPrefix(s.python, v[1]+"/") }) {
		t.Errorf("the execute-only interpreter is hidden: %v", binds)
	}
}
