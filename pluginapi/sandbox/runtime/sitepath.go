package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
)

// SitePath returns the directories the site module of python adds to
// sys.path, in order (the site-packages and what .pth files name), for
// ZygoteConfig.SitePath. It asks the interpreter, with and without site,
// the way a zygote starts it (-I).
func SitePath(ctx context.Context, python string) ([]string, error) {
	with, err := sysPath(ctx, python, "-I")
	if err != nil {
		return nil, err
	}
	without, err := sysPath(ctx, python, "-I", "-S")
	if err != nil {
		return nil, err
	}
	var added []string
	for _, p := range with {
		if !slices.Contains(without, p) && !slices.Contains(added, p) {
			added = append(added, p)
		}
	}
	return added, nil
}

func sysPath(ctx context.Context, python string, flags ...string) ([]string, error) {
	args := append(flags, "-c", "import sys, json; print(json.dumps(sys.path))")
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ask %s for its module path: %w", python, err)
	}
	var path []string
	if err := json.Unmarshal(out, &path); err != nil {
		return nil, fmt.Errorf("ask %s for its module path: %w", python, err)
	}
	return path, nil
}
