package runtime

import (
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestSitePath starts one zygote with site and one without it but with the
// site path SitePath found: programs see the same sys.path and the
// builtins they use of site's.
func TestSitePath(t *testing.T) {
	ws := t.TempDir()
	site, err := SitePath(t.Context(), python)
	if err != nil {
		t.Fatal(err)
	}
	if len(site) == 0 {
		t.Skipf("%s's site adds nothing to sys.path", python)
	}
	base := testConfig(t, ws)
	without := base
	without.SitePath = site
	if !strings.Contains(strings.Join(without.Command(), " "), " -S ") {
		t.Fatalf("command without site: %v", without.Command())
	}
	code := "import sys\nprint(sys.flags.no_site, sys.path[1:])\ncopyright\nhelp\nquit\nexit(3)"
	var paths []string
	for _, cfg := range []ZygoteConfig{base, without} {
		r := runZygote(t, Options{}, cfg)
		h := &recHost{}
		res, err := r.Exec(t.Context(), sandbox.ExecRequest{Code: code}, h)
		if err != nil || res.ExitCode != 3 {
			t.Fatalf("site path %v: %v %+v %+v stderr %q", cfg.SitePath, err, res, res.Error, h.stderr.String())
		}
		flag, path, _ := strings.Cut(h.stdout.String(), " ")
		if want := map[bool]string{false: "0", true: "1"}[cfg.SitePath != nil]; flag != want {
			t.Errorf("no_site %s, want %s", flag, want)
		}
		paths = append(paths, path)
	}
	if paths[0] != paths[1] {
		t.Errorf("sys.path with site:\n%s\nwithout, from SitePath:\n%s", paths[0], paths[1])
	}
}
