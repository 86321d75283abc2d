// Command importrules fails when a package of this module imports another
// that the layering forbids, naming the rule and the import:
//
//	cmd → client → api; cmd/cexecd → core → pluginapi; plugins/* → pluginapi
//
// It reads the import graph from `go list` (production and test imports
// alike: a test that reaches across a boundary couples the two sides just
// the same) and prints one line per violation. `make lint` runs it.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func main() {
	pkgs, module, err := load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "importrules:", err)
		os.Exit(2)
	}
	bad := check(module, pkgs)
	for _, v := range bad {
		fmt.Println(v)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "importrules: %d forbidden import(s)\n", len(bad))
		os.Exit(1)
	}
}

// load lists every package of the module with its imports, the module path
// trimmed from both.
func load() ([]pkg, string, error) {
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		return nil, "", fmt.Errorf("go list -m: %w", err)
	}
	module := strings.TrimSpace(string(mod))
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-e", "-f",
		"{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		p := pkg{path: trim(module, f[0])}
		for _, imp := range f[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				p.imports = append(p.imports, trim(module, imp))
			} else {
				p.external = append(p.external, imp)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, module, sc.Err()
}

func trim(module, path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}
