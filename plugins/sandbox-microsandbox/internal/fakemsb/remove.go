package main

import (
	"fmt"
	"os"
)

// remove is `msb remove`: it forgets sandboxes and their roots, running
// ones only with --force.
func remove(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--label": "label"},
		map[string]string{"--force": "force", "-f": "force", "--quiet": "quiet", "-q": "quiet"})
	if f == nil {
		return unknownFlag("remove", bad, "msb remove [OPTIONS] [NAMES]...")
	}
	return locked(func() int {
		code := 0
		for _, name := range f.pos {
			r, err := load(name)
			if err != nil {
				if !f.bools["quiet"] {
					fail("sandbox not found: " + name)
				}
				code = 1
				continue
			}
			if r.Status == "Running" {
				if !f.bools["force"] {
					if !f.bools["quiet"] {
						fail("sandbox still running: " + name)
					}
					code = 1
					continue
				}
				killExecs(r)
			}
			_ = os.Remove(recordPath(name))
			_ = os.RemoveAll(r.Root)
			if !f.bools["quiet"] {
				fmt.Fprintf(os.Stderr, "   ✓ Removed      %s\n", name)
			}
		}
		return code
	})
}
