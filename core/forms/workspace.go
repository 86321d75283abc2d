package forms

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
)

// Workspace is where one tenant's files are: its host folder and, when
// cexecd gives tenants their own uid, the owner of files written there.
type Workspace struct {
	Dir string
	// UID and GID own the files fill_pdf writes; -1 leaves them as created.
	UID, GID int
}

// Resolver returns the calling tenant's workspace; it is asked on each call
// because a tenant's workspace may be mounted again between calls.
type Resolver func() (Workspace, error)

// maxPDFSize bounds a PDF read into memory.
const maxPDFSize = 64 << 20

// sandboxRoot is where sandboxed code sees the workspace.
const sandboxRoot = "/workspace"

// relPath turns a path as a tool call gives it into one relative to the
// workspace, or says in a sentence why it cannot be one.
func relPath(field, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s is empty; give a path in the workspace, such as forms/application.pdf", field)
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(path.Clean(p), sandboxRoot)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			return "", fmt.Errorf("%s %q is outside the workspace; give a path relative to it or under %s", field, p, sandboxRoot)
		}
		p = strings.TrimPrefix(rest, "/")
	}
	p = path.Clean(p)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%s %q is outside the workspace", field, p)
	}
	return p, nil
}

// readFile reads rel from the workspace root.
func readFile(root *os.Root, field, rel string) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe a program planted would otherwise
	// wait for a writer forever; it is refused below as not a file.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, pathErr(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, fmt.Errorf("%s: %s is a folder, not a PDF", field, rel)
		}
		return nil, fmt.Errorf("%s: %s is not a regular file", field, rel)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPDFSize+1))
	if err != nil {
		// Not the *PathError itself: its path is the host's, where
		// cexecd keeps the workspace.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: read %s: %w", field, rel, err)
	}
	if len(b) > maxPDFSize {
		return nil, fmt.Errorf("%s: %s is larger than %d MiB", field, rel, maxPDFSize>>20)
	}
	return b, nil
}

// writeFile writes data to rel atomically: a temporary file beside it,
// synced, then renamed over it.
func writeFile(root *os.Root, ws Workspace, rel string, data []byte) error {
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("out: %w", pathErr(err))
		}
	}
	// A name of its own per call: fills of one out at once must not write
	// into one temporary file and rename a mix of them.
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+"."+rand.Text()+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("out: %w", pathErr(err))
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && ws.UID >= 0 {
		err = root.Lchown(tmp, ws.UID, ws.GID)
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("out: write %s: %w", rel, pathErr(err))
	}
	return nil
}

// pathErr says an os.Root escape in words; other errors stay as they are.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes from parent") {
		return fmt.Errorf("%s leads outside the workspace", pe.Path)
	}
	return err
}
