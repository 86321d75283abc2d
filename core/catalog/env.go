package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// baseEnv names the only daemon variables a local server inherits: enough to
// find programs, a home, a temp dir and a locale (the same set pluginhost gives
// plugins). Everything else, API keys in particular, reaches a server only when
// its mcp_server block lists it in env.
var baseEnv = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// defaultPath is PATH for servers when the daemon has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// childEnv is the complete environment of a stdio server: baseEnv read through
// lookup, overridden by the block's env. Sorted, so it is stable in tests and
// logs of the variable names.
func childEnv(lookup func(string) (string, bool), extra map[string]string) []string {
	vars := make(map[string]string, len(baseEnv)+len(extra))
	for _, k := range baseEnv {
		if v, ok := lookup(k); ok {
			vars[k] = v
		}
	}
	if _, ok := vars["PATH"]; !ok {
		vars["PATH"] = defaultPath
	}
	for k, v := range extra {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// envValue returns the value of key in an environment list.
func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath resolves a command the way the child's own PATH would, not the
// daemon's: a block that sets PATH in env gets its programs found there.
// Commands with a slash are taken as paths (relative ones against dir).
func lookPath(command string, env []string, dir string) (string, error) {
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("command %s: %w", command, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(envValue(env, "PATH")) {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative PATH entry would depend on the daemon's cwd
		}
		p := filepath.Join(d, command)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in the server's PATH (%s)", command, envValue(env, "PATH"))
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode()&0o111 == 0:
		return fs.ErrPermission
	}
	return nil
}
