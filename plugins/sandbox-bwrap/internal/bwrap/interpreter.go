package bwrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// interpPrefix names the temporary directory of a plugin process's
// execute-only interpreter copies (see Plugin.interpreter).
const interpPrefix = "cexec-bwrap-python-"

// interpreter returns an execute-only copy of python, made once per plugin
// process and interpreter, which bwrapArgs binds over the interpreter's path
// in sandboxes. A process that executes a file it may not read is made
// non-dumpable by the kernel (to fs.suid_dumpable, 0 on most systems) from
// its first instruction: programs can then neither trace the zygote nor
// read its memory, environment or descriptors through /proc, which the
// zygote otherwise arranges itself with prctl through _ctypes (see
// runtime's harden), 0.4-1.2 ms of a fresh sandbox's print(1+1) here. ""
// when no copy can be made; zygotes then call prctl.
func (p *Plugin) interpreter(ctx context.Context, python string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if path, ok := p.interps[python]; ok {
		return path
	}
	path, err := p.copyExecOnly(ctx, python)
	if err != nil && ctx.Err() != nil {
		return "" // the request went away; the next one tries again
	}
	if err != nil {
		p.log.Warn("sandboxes run the interpreter itself; their zygotes make themselves non-dumpable with prctl", "python", python, "error", err)
	}
	if p.interps == nil {
		p.interps = map[string]string{}
	}
	p.interps[python] = path
	return path
}

// copyExecOnly copies python into the plugin process's interpreter
// directory with mode 0111 and checks that it runs. Called with p.mu held.
func (p *Plugin) copyExecOnly(ctx context.Context, python string) (string, error) {
	if p.interpDir == "" {
		removeStaleTemp(interpPrefix)
		dir, err := os.MkdirTemp("", tempPattern(interpPrefix))
		if err == nil {
			// bwrap, which may run as a sandbox's own user, only needs to
			// reach the copies.
			err = os.Chmod(dir, 0o711)
			if err != nil {
				_ = os.RemoveAll(dir)
			}
		}
		if err != nil {
			return "", fmt.Errorf("create interpreter directory: %w", err)
		}
		p.interpDir = dir
	}
	dst := filepath.Join(p.interpDir, "python-"+strconv.Itoa(len(p.interps)))
	if err := copyFile(python, dst, 0o111); err != nil {
		_ = os.Remove(dst)
		return "", fmt.Errorf("copy %s: %w", python, err)
	}
	// A bind keeps its source's noexec: the copy must run where it lies
	// (a temporary directory mounted noexec would refuse it).
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dst, "-I", "-S", "-c", "")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(dst)
		return "", fmt.Errorf("run the copy %s: %w %s", dst, err, strings.TrimSpace(string(out)))
	}
	return dst, nil
}
