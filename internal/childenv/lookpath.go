package childenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LookPath resolves a child's command the way the child's own PATH would,
// not the daemon's: a block that sets PATH in env gets its programs found
// there. Commands with a slash are taken as paths (relative ones against
// dir). Both starting a server and validating its block use it, so that
// what validates is what starts.
func LookPath(command string, env []string, dir string) (string, error) {
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
	for _, d := range filepath.SplitList(Value(env, "PATH")) {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative PATH entry would depend on the daemon's cwd
		}
		p := filepath.Join(d, command)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in the server's PATH (%s)", command, Value(env, "PATH"))
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
