// Package childenv builds the environment of the processes cexecd starts
// (plugins, stdio MCP servers) from an allowlist: nothing of the daemon's
// environment, API keys in particular, reaches a child unless its config
// block lists it.
package childenv

import (
	"os"
	"slices"
	"strings"
)

// Base names the only daemon variables a child inherits: enough to find
// programs, a home, a temp dir and a locale.
var Base = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// DefaultPath is PATH for children when the daemon has none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Build returns a child's complete environment: Base read through lookup
// (nil means os.LookupEnv), PATH defaulted, then each of layers in order,
// later ones winning. Sorted, so it is stable in tests and in logs of the
// variable names.
func Build(lookup func(string) (string, bool), layers ...map[string]string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	vars := make(map[string]string, len(Base))
	for _, k := range Base {
		if v, ok := lookup(k); ok {
			vars[k] = v
		}
	}
	if _, ok := vars["PATH"]; !ok {
		vars["PATH"] = DefaultPath
	}
	for _, layer := range layers {
		for k, v := range layer {
			vars[k] = v
		}
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// Value returns the value of key in an environment list, "" when absent.
func Value(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}
