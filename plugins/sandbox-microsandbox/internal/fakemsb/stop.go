package main

import (
	"fmt"
	"os"
)

// stop is `msb stop`: a stopped VM takes what its exec sessions started
// with it.
func stop(args []string) int {
	f, bad := parseFlags(args, map[string]string{"--timeout": "timeout", "-t": "timeout", "--label": "label"},
		map[string]string{"--force": "force", "-f": "force", "--quiet": "quiet", "-q": "quiet"})
	if f == nil {
		return unknownFlag("stop", bad, "msb stop [OPTIONS] [NAMES]...")
	}
	return locked(func() int {
		code := 0
		for _, name := range f.pos {
			r, err := load(name)
			if err != nil {
				code = fail("sandbox not found: " + name)
				continue
			}
			killExecs(r)
			r.Status = "Stopped"
			if err := save(r); err != nil {
				code = fail(err.Error())
				continue
			}
			if !f.bools["quiet"] {
				fmt.Fprintf(os.Stderr, "   ✓ Stopped      %s\n", name)
			}
		}
		return code
	})
}
