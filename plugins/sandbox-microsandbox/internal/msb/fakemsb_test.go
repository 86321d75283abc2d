package msb

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/plugintest"
	"github.com/cexec/cexec/pluginapi/sandbox"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// fakeCLI runs the fake msb directly, as a user would, for the tests to
// look at what the plugin did.
func fakeCLI(t *testing.T, home string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(fakeMSB, args...)
	cmd.Env = append(os.Environ(), "MSB_HOME="+home, "NO_COLOR=1")
	return cmd.Output()
}

// fakeList returns the fake's sandboxes by name and status.
func fakeList(t *testing.T, home string) map[string]string {
	t.Helper()
	out, err := fakeCLI(t, home, "list", "--format", "json")
	if err != nil {
		t.Fatalf("msb list: %v", err)
	}
	var entries []listEntry
	must(t, json.Unmarshal(out, &entries))
	m := map[string]string{}
	for _, e := range entries {
		m[e.Name] = e.Status
	}
	return m
}

func TestFakeMSB_Capabilities(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string) map[string]any
		reason string
	}{
		{name: "doctor passes", setup: func(*testing.T, string) map[string]any { return nil }},
		{name: "no hardware virtualisation", setup: func(t *testing.T, dir string) map[string]any {
			p := filepath.Join(dir, "cpuinfo-novirt")
			must(t, os.WriteFile(p, []byte("flags\t\t: fpu vme sse\n"), 0o644))
			t.Setenv("FAKEMSB_CPUINFO", p)
			return nil
		}, reason: "msb doctor: CPU virtualization is not available (no vmx (Intel) or svm (AMD) flag in /proc/cpuinfo;"},
		{name: "no /dev/kvm", setup: func(t *testing.T, dir string) map[string]any {
			t.Setenv("FAKEMSB_KVM", filepath.Join(dir, "no-such-kvm"))
			return nil
		}, reason: "msb doctor: /dev/kvm is not present (the KVM kernel module is not loaded;"},
		{name: "msb not installed", setup: func(*testing.T, string) map[string]any {
			return map[string]any{"msb": "/nonexistent/msb"}
		}, reason: "/nonexistent/msb is not installed"},
		{name: "msb too old", setup: func(t *testing.T, _ string) map[string]any {
			t.Setenv("FAKEMSB_VERSION", "0.2.6")
			return nil
		}, reason: "is msb 0.2.6; this backend drives msb 0.7 or newer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := fakeHost(t)
			impl := New(nil)
			defer impl.Close()
			sb := plugintest.Sandbox(t, impl)
			diags, err := sb.Configure(t.Context(), fakeConfig(home, tc.setup(t, t.TempDir())), sandbox.APIVersion)
			if err != nil || diags.HasErrors() {
				t.Fatalf("configure: %v %v", diags, err)
			}
			caps, err := sb.Capabilities(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if caps.Isolation != "microvm" || caps.Network {
				t.Errorf("capabilities %+v", caps)
			}
			if tc.reason == "" {
				if !caps.Available || len(diags) != 0 {
					t.Errorf("capabilities %+v, diagnostics %v", caps, diags)
				}
				return
			}
			want := unavailablePrefix
			if caps.Available || !strings.HasPrefix(caps.UnavailableReason, want) || !strings.Contains(caps.UnavailableReason, tc.reason) {
				t.Errorf("reason %q, want %q…%q", caps.UnavailableReason, want, tc.reason)
			}
			// cexecd validate shows Configure's warnings.
			if len(diags) != 1 || diags[0].Severity != pluginapi.SeverityWarning || diags[0].Detail != caps.UnavailableReason {
				t.Errorf("diagnostics %+v", diags)
			}
			if _, err := sb.Create(t.Context(), sandbox.CreateRequest{ID: "x"}); !errors.Is(err, pluginapi.ErrUnavailable) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("create: %v", err)
			}
		})
	}
}

func TestFakeMSB_CreateCommandLine(t *testing.T) {
	home := fakeHost(t)
	impl, sb := configured(t, fakeConfig(home, map[string]any{"cpus": 2}))
	servers, skills := stubTree(t)
	id, ws := create(t, sb, sandbox.Limits{MemoryBytes: 300 << 20, TmpBytes: 32 << 20},
		sandbox.Mount{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		sandbox.Mount{Source: skills, Target: "/cexec/skills", ReadOnly: true})
	name := sandboxName(id)
	out, err := fakeCLI(t, home, "inspect", name, "--format", "json")
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var in struct {
		Status string `json:"status"`
		Config struct {
			Env []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"env"`
			Mounts []struct {
				Type    string `json:"type"`
				Host    string `json:"host"`
				Guest   string `json:"guest"`
				SizeMiB int    `json:"size_mib"`
				Options struct {
					ReadOnly bool `json:"readonly"`
				} `json:"options"`
			} `json:"mounts"`
			Labels  map[string]string `json:"labels"`
			Network struct {
				Policy struct {
					DefaultEgress string `json:"default_egress"`
				} `json:"policy"`
			} `json:"network"`
			Resources struct {
				CPUs      int `json:"cpus"`
				MemoryMiB int `json:"memory_mib"`
			} `json:"resources"`
			Runtime struct {
				Workdir string `json:"workdir"`
			} `json:"runtime"`
		} `json:"config"`
	}
	must(t, json.Unmarshal(out, &in))
	c := in.Config
	if in.Status != "Running" || c.Resources.CPUs != 2 || c.Resources.MemoryMiB != 300 || c.Runtime.Workdir != "/workspace" || c.Network.Policy.DefaultEgress != "deny" {
		t.Errorf("inspect: %s", out)
	}
	if c.Labels["cexec.backend"] != "microsandbox" || c.Labels["cexec.tenant"] != "tenant-a" || c.Labels["cexec.owner"] != strconv.Itoa(os.Getpid()) {
		t.Errorf("labels %v", c.Labels)
	}
	mounts := map[string]string{}
	for _, m := range c.Mounts {
		mounts[m.Guest] = m.Type + " " + m.Host + " " + strconv.FormatBool(m.Options.ReadOnly) + " " + strconv.Itoa(m.SizeMiB)
	}
	realWS, _ := filepath.EvalSymlinks(ws)
	realServers, _ := filepath.EvalSymlinks(servers)
	want := map[string]string{
		"/tmp":           "Tmpfs  false 32",
		"/cexec/lib":     "Bind " + impl.lib + " true 0",
		"/workspace":     "Bind " + realWS + " false 0",
		"/cexec/servers": "Bind " + realServers + " true 0",
	}
	for k, v := range want {
		if mounts[k] != v {
			t.Errorf("mount %s: %q, want %q", k, mounts[k], v)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Key] = e.Value
	}
	if env["CEXEC_TEST"] != "yes" || env["PYTHONPATH"] != (runtime.ZygoteConfig{}).Env()["PYTHONPATH"] {
		t.Errorf("env %v", env)
	}
}

func TestFakeMSB_Exec(t *testing.T) {
	home := fakeHost(t)
	_, sb := configured(t, fakeConfig(home, nil))
	servers, skills := stubTree(t)
	id, ws := create(t, sb, sandbox.Limits{},
		sandbox.Mount{Source: servers, Target: "/cexec/servers", ReadOnly: true},
		sandbox.Mount{Source: skills, Target: "/cexec/skills", ReadOnly: true})
	checkCases(t, sb, id, append(append([]execCase{}, commonCases...), callCases...))
	if got, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(got) != "hi" {
		t.Errorf("workspace file on the host: %q %v", got, err)
	}
	t.Run("call recorded", func(t *testing.T) {
		h := toolHost()
		run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "from cexec import call_tool\ncall_tool('filesystem', 'read_text_file', {'path': '/b'})"}, h)
		calls := h.Calls()
		if len(calls) != 1 || calls[0].Method != "call_tool" || !strings.Contains(string(calls[0].Params), `"path":"/b"`) {
			t.Errorf("calls %+v", calls)
		}
	})
	t.Run("fresh globals", func(t *testing.T) { checkFreshGlobals(t, sb, id) })
	t.Run("persistent", func(t *testing.T) {
		for i, want := range []string{"1\n", "2\n", "3\n"} {
			h := &plugintest.Host{}
			res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "n = globals().get('n', 0) + 1\nprint(n)", Persistent: true, Session: "s"}, h)
			if h.Stdout() != want {
				t.Fatalf("run %d: %q %+v", i, h.Stdout(), res)
			}
		}
	})
	t.Run("list and health", func(t *testing.T) {
		list, err := sb.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != id || list[0].Tenant != "tenant-a" || list[0].State != "ready" || list[0].Executions < 5 || list[0].RSSBytes < 1<<20 {
			t.Errorf("list %+v", list)
		}
		if err := sb.Health(t.Context(), id); err != nil {
			t.Errorf("health: %v", err)
		}
		if err := sb.Health(t.Context(), "nope"); !errors.Is(err, pluginapi.ErrNotFound) {
			t.Errorf("health of an unknown sandbox: %v", err)
		}
	})
}

func TestFakeMSB_Timeout(t *testing.T) {
	home := fakeHost(t)
	_, sb := configured(t, fakeConfig(home, nil))
	id, _ := create(t, sb, sandbox.Limits{Timeout: 500 * time.Millisecond})
	res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "while True:\n    pass"}, nil)
	if !res.TimedOut || res.Error == nil || res.Error.Type != "Timeout" || res.SandboxOK {
		t.Errorf("result %+v (error %+v)", res, res.Error)
	}
	if err := sb.Health(t.Context(), id); err == nil {
		t.Errorf("a timed-out sandbox is healthy")
	}
	// A per-execution timeout overrides the sandbox's.
	id2, _ := create(t, sb, sandbox.Limits{Timeout: 30 * time.Second})
	res = run(t, sb, sandbox.ExecRequest{SandboxID: id2, Code: "import time\ntime.sleep(30)", Timeout: 300 * time.Millisecond}, nil)
	if !res.TimedOut {
		t.Errorf("result %+v", res)
	}
}

// TestFakeMSB_Crash tells the two ways a sandbox dies apart: the VM going
// away under msb exec (a failure msb reports) and the guest's runtime
// exiting (a status msb passes on).
func TestFakeMSB_Crash(t *testing.T) {
	home := fakeHost(t)
	_, sb := configured(t, fakeConfig(home, nil))

	t.Run("VM stopped during an execution", func(t *testing.T) {
		id, _ := create(t, sb, sandbox.Limits{})
		h := newStartedHost()
		go func() {
			<-h.started
			cmd := exec.Command(fakeMSB, "stop", sandboxName(id))
			cmd.Env = append(os.Environ(), "MSB_HOME="+home)
			_ = cmd.Run()
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: "import time\nprint('started', flush=True)\ntime.sleep(30)"}, h)
		if err != nil {
			t.Fatal(err)
		}
		if res.SandboxOK || res.Error == nil || res.Error.Type != "Killed" || !strings.Contains(res.Error.Message, "msb exec failed (exit status 1): exec session ended without exit event") {
			t.Errorf("result %+v (error %+v)", res, res.Error)
		}
		if h.Stdout() != "started\n" {
			t.Errorf("stdout %q", h.Stdout())
		}
		list, err := sb.List(t.Context())
		if err != nil || len(list) == 0 || list[0].State != "exited" {
			t.Errorf("list %+v %v", list, err)
		}
		if err := sb.Health(t.Context(), id); err == nil {
			t.Errorf("a stopped sandbox is healthy")
		}
		if _, err := sb.Exec(t.Context(), sandbox.ExecRequest{SandboxID: id, Code: "print(1)"}, &plugintest.Host{}); !errors.Is(err, pluginapi.ErrUnavailable) {
			t.Errorf("exec in a dead sandbox: %v", err)
		}
	})

	t.Run("guest runtime killed", func(t *testing.T) {
		// Without a pid namespace: as its init the zygote cannot be
		// killed from inside.
		_, sb := configured(t, fakeConfig(home, map[string]any{"pid_namespace": false}))
		id, _ := create(t, sb, sandbox.Limits{})
		res := run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(5)"}, nil)
		if res.SandboxOK || res.Error == nil || res.Error.Type != "Killed" || !strings.Contains(res.Error.Message, "the runtime in the guest exited with status 137") {
			t.Errorf("result %+v (error %+v)", res, res.Error)
		}
	})
}

// TestFakeMSB_PidNamespace checks that nothing a program starts outlives
// its execution where the runtime is its pid namespace's init (here when
// this machine lets the fake's unshare make one, as a guest's root can).
func TestFakeMSB_PidNamespace(t *testing.T) {
	home := fakeHost(t)
	_, sb := configured(t, fakeConfig(home, nil))
	id, _ := create(t, sb, sandbox.Limits{})
	h := &plugintest.Host{}
	run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "import os, subprocess\nsubprocess.Popen(['sleep', '100'], start_new_session=True)\nprint(os.getppid())"}, h)
	if h.Stdout() != "1\n" {
		t.Skipf("the runtime is not a pid namespace's init here (unshare refused); its parent is %q", h.Stdout())
	}
	h = &plugintest.Host{}
	run(t, sb, sandbox.ExecRequest{SandboxID: id, Code: "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))"}, h)
	if h.Stdout() != "2\n" {
		t.Errorf("processes after an execution that left one running: %q, want the runtime and the program only", h.Stdout())
	}
}

func TestFakeMSB_CreateFailures(t *testing.T) {
	home := fakeHost(t)
	tests := []struct {
		name   string
		config map[string]any
		env    string
		want   string
		// msb is true for failures msb reports itself, false for exit
		// statuses of the guest's runtime.
		msb  bool
		code int
	}{
		{name: "VM does not boot", env: "FAKEMSB_BOOT_FAIL", want: `msb create failed (exit status 1): failed to start "cexec-`, msb: true, code: 1},
		{name: "no Python in the image", config: map[string]any{"python": "/opt/nopython/bin/python3", "pid_namespace": false},
			want: `msb exec failed (exit status 127): failed to exec "/opt/nopython/bin/python3" (not found:`, msb: true, code: 127},
		{name: "no Python in the image, through unshare", config: map[string]any{"python": "/opt/nopython/bin/python3"},
			want: `the runtime in the guest exited with status 127: `, code: 127},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, "1")
			}
			p := New(nil)
			defer p.Close()
			diags, err := p.Configure(t.Context(), fakeConfig(home, tc.config), sandbox.APIVersion)
			if err != nil || diags.HasErrors() {
				t.Fatalf("configure: %v %v", diags, err)
			}
			_, err = p.Create(t.Context(), sandbox.CreateRequest{ID: newID(), Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}})
			var ce *CommandError
			var ge *GuestExitError
			switch {
			case tc.msb && (!errors.As(err, &ce) || ce.ExitCode != tc.code):
				t.Errorf("create: %v, want a *CommandError with exit status %d", err, tc.code)
			case !tc.msb && (!errors.As(err, &ge) || ge.ExitCode != tc.code || !strings.Contains(ge.Stderr, "/opt/nopython/bin/python3")):
				t.Errorf("create: %v, want a *GuestExitError with exit status %d", err, tc.code)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("create: %v, want %q", err, tc.want)
			}
			if left := fakeList(t, home); len(left) != 0 {
				t.Errorf("sandboxes left behind: %v", left)
			}
		})
	}
}

// TestFakeMSB_RequestsRefused checks what the plugin refuses beyond the
// conformance suite's requests: mounts over the runtime or the system, and
// sources msb's mount syntax cannot express.
func TestFakeMSB_RequestsRefused(t *testing.T) {
	home := fakeHost(t)
	_, sb := configured(t, fakeConfig(home, nil))
	ws := t.TempDir()
	colon := filepath.Join(t.TempDir(), "a:b")
	must(t, os.Mkdir(colon, 0o755))
	tests := []struct {
		name string
		req  sandbox.CreateRequest
	}{
		{"mount over the runtime", sandbox.CreateRequest{ID: "m1", Mounts: []sandbox.Mount{{Source: ws, Target: "/cexec/lib"}}}},
		{"mount over /etc", sandbox.CreateRequest{ID: "m2", Mounts: []sandbox.Mount{{Source: ws, Target: "/etc/x"}}}},
		{"colon in the source", sandbox.CreateRequest{ID: "m4", Mounts: []sandbox.Mount{{Source: colon, Target: "/workspace"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sb.Create(t.Context(), tc.req); !errors.Is(err, pluginapi.ErrInvalidArgument) {
				t.Errorf("create: %v", err)
			}
		})
	}
}

// TestFakeMSB_Cleanup checks that Destroy and Close leave nothing behind in
// msb or on this machine, and that sandboxes of a plugin that died are
// removed by the next one.
func TestFakeMSB_Cleanup(t *testing.T) {
	home := fakeHost(t)
	// A sandbox of an earlier plugin process (pid 4194304 is above the
	// kernel's pid limit, so never alive) and one of someone else.
	for _, n := range []string{"cexec-4194304-old", "someone-elses"} {
		if out, err := fakeCLI(t, home, "create", "--quiet", "--name", n, "--label", labelBackend, "python"); err != nil {
			t.Fatalf("create %s: %v %s", n, err, out)
		}
	}
	p := New(nil)
	defer p.Close()
	must(t, diagsErr(p.Configure(t.Context(), fakeConfig(home, nil), sandbox.APIVersion)))
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := p.Create(ctx, sandbox.CreateRequest{ID: id, Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fakeList(t, home); got["cexec-4194304-old"] != "" || got["someone-elses"] != "Running" || got[sandboxName("a")] != "Running" {
		t.Errorf("sandboxes after the first create: %v", got)
	}
	ea, _ := p.entries.Get("a")
	ba := ea.box.(*cliBox)
	res, err := p.Exec(ctx, sandbox.ExecRequest{SandboxID: "a", Code: "import subprocess\nsubprocess.Popen(['sleep', '60'])\nimport os\nprint(os.getpid())"}, &plugintest.Host{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if err := p.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, "a"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("second destroy: %v", err)
	}
	select {
	case <-ba.exited:
	default:
		t.Errorf("msb exec of a still runs")
	}
	if got := fakeList(t, home); got[sandboxName("a")] != "" {
		t.Errorf("a is still in msb: %v", got)
	}
	lib := p.lib
	eb, _ := p.entries.Get("b")
	bb := eb.box.(*cliBox)
	must(t, p.Close())
	select {
	case <-bb.exited:
	case <-time.After(5 * time.Second):
		t.Errorf("msb exec of b still runs")
	}
	if got := fakeList(t, home); len(got) != 1 || got["someone-elses"] == "" {
		t.Errorf("sandboxes after close: %v", got)
	}
	if _, err := os.Stat(lib); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("runtime directory %s left behind", lib)
	}
	if _, err := p.Create(ctx, sandbox.CreateRequest{ID: "c"}); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Errorf("create after close: %v", err)
	}
}

// TestFakeMSB_CloseDuringCreate checks that closing the plugin while a VM
// boots cancels the boot and removes the VM.
func TestFakeMSB_CloseDuringCreate(t *testing.T) {
	home := fakeHost(t)
	t.Setenv("FAKEMSB_BOOT_DELAY", "20s")
	p := New(nil)
	must(t, diagsErr(p.Configure(t.Context(), fakeConfig(home, nil), sandbox.APIVersion)))
	errc := make(chan error, 1)
	go func() {
		_, err := p.Create(context.Background(), sandbox.CreateRequest{ID: "slow", Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace"}}})
		errc <- err
	}()
	name := sandboxName("slow")
	deadline := time.Now().Add(10 * time.Second)
	for fakeList(t, home)[name] == "" {
		if time.Now().After(deadline) {
			t.Fatal("the boot never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A Close that waited for the boot would hang until the test's timeout.
	must(t, p.Close())
	if err := <-errc; err == nil {
		t.Errorf("create succeeded after close")
	}
	if left := fakeList(t, home); len(left) != 0 {
		t.Errorf("sandboxes left behind: %v", left)
	}
}

func diagsErr(d pluginapi.Diagnostics, err error) error {
	if err != nil {
		return err
	}
	if d.HasErrors() {
		return d
	}
	return nil
}

func TestFakeMSB_Cancel(t *testing.T) {
	home := fakeHost(t)
	_, sb := configured(t, fakeConfig(home, nil))
	id, _ := create(t, sb, sandbox.Limits{})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: "import time\ntime.sleep(30)"}, &plugintest.Host{})
	if err == nil && (res.SandboxOK || res.Error == nil) {
		t.Errorf("cancelled execution: %+v %v", res, err)
	}
}
