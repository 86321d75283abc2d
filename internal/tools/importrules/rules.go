package main

import (
	"fmt"
	"slices"
	"strings"
)

// pkg is a package of the module and the module packages it imports, both
// relative to the module path ("core/pool", "pluginapi/sandbox").
type pkg struct {
	path    string
	imports []string
	// external are its imports from other modules, whole.
	external []string
}

// confinement keeps a heavy outside dependency in the one package tree that
// needs it: packages outside allow may not import anything under prefixes.
type confinement struct {
	name     string
	prefixes []string
	allow    string
}

var confinements = []confinement{
	{name: "only plugins/sandbox-k8s imports the Kubernetes client libraries (they are heavy)",
		prefixes: []string{"k8s.io/", "sigs.k8s.io/controller-runtime"}, allow: "plugins/sandbox-k8s"},
}

// rule forbids packages under from to import packages under any of deny,
// unless the import is also under one of allow (or, with ownPlugin, inside
// the importing plugin's own folder).
type rule struct {
	name      string
	from      string
	deny      []string
	allow     []string
	ownPlugin bool
}

// rules is the layering of ARCHITECTURE.md §2. A prefix "x" matches x and
// everything below it.
var rules = []rule{
	{name: "api imports nothing of the module but api", from: "api",
		deny: []string{""}, allow: []string{"api"}},
	{name: "client imports only api and internal (cmd → client → api)", from: "client",
		deny: []string{""}, allow: []string{"api", "client", "internal"}},
	{name: "cexecctl reaches the daemon only through client and api", from: "cmd/cexecctl",
		deny: []string{"core", "plugins", "pluginapi"}},
	{name: "cexecctl-bench (cexecctl bench) reaches the daemon only through client and api", from: "cmd/cexecctl-bench",
		deny: []string{"core", "plugins", "pluginapi"}},
	{name: "core imports pluginapi, api and internal, never plugins, client or commands", from: "core",
		deny: []string{"plugins", "client", "cmd", "examples"}},
	{name: "pluginapi imports nothing of the daemon or its clients", from: "pluginapi",
		deny: []string{"core", "plugins", "client", "cmd", "examples"}},
	{name: "a plugin imports pluginapi, internal and its own packages only", from: "plugins",
		deny: []string{""}, allow: []string{"pluginapi", "internal", "api"}, ownPlugin: true},
	{name: "an example imports only the public API (pluginapi, client, api), as a third party would", from: "examples",
		deny: []string{""}, allow: []string{"pluginapi", "client", "api"}, ownPlugin: true},
	{name: "internal helpers import no layer above them", from: "internal",
		deny: []string{"core", "plugins", "client", "cmd", "examples"}},
	// Last, so that a more specific rule names the boundary where one does.
	{name: "nothing but cmd/cexecd imports core", from: "",
		deny: []string{"core"}},
}

// exempt lists who may do what a rule forbids everyone else.
var exempt = map[string][]string{
	"nothing but cmd/cexecd imports core": {"cmd/cexecd", "core"},
}

// under reports whether path is prefix or below it; "" is under "" only
// as "everything".
func under(path, prefix string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// pluginRoot is "plugins/<name>" (or "examples/<name>") for a path below it.
func pluginRoot(path string) string {
	parts := strings.SplitN(path, "/", 3)
	if len(parts) < 2 {
		return path
	}
	return parts[0] + "/" + parts[1]
}

// check returns one line per forbidden import, naming the first rule it
// breaks, sorted and unique.
func check(module string, pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		for _, imp := range p.imports {
			if imp == p.path {
				continue
			}
			if r, bad := broken(p.path, imp); bad {
				out = append(out, fmt.Sprintf("%s/%s imports %s/%s: %s", module, p.path, module, imp, r.name))
			}
		}
		for _, imp := range p.external {
			if c, bad := confined(p.path, imp); bad {
				out = append(out, fmt.Sprintf("%s/%s imports %s: %s", module, p.path, imp, c.name))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// confined returns the confinement that forbids from to import the outside
// package imp.
func confined(from, imp string) (confinement, bool) {
	for _, c := range confinements {
		if under(from, c.allow) {
			continue
		}
		for _, p := range c.prefixes {
			if strings.HasPrefix(imp, p) {
				return c, true
			}
		}
	}
	return confinement{}, false
}

// broken returns the first rule that forbids from to import imp.
func broken(from, imp string) (rule, bool) {
	for _, r := range rules {
		if under(from, r.from) && !exempted(r.name, from) && denied(r, from, imp) {
			return r, true
		}
	}
	return rule{}, false
}

func exempted(name, path string) bool {
	for _, e := range exempt[name] {
		if under(path, e) {
			return true
		}
	}
	return false
}

func denied(r rule, from, imp string) bool {
	if r.ownPlugin && under(imp, pluginRoot(from)) {
		return false
	}
	for _, a := range r.allow {
		if under(imp, a) {
			return false
		}
	}
	for _, d := range r.deny {
		if under(imp, d) {
			return true
		}
	}
	return false
}
