package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/internal/bwrapproc"
)

//go:embed localscan.py
var localScanScript string

const (
	// localScanTimeout bounds reading the local tools.
	localScanTimeout = 20 * time.Second
	// maxLocalScanOutput bounds the scanner's JSON.
	maxLocalScanOutput = 16 << 20
	// sandboxServers is where the local servers directory appears inside
	// the scanner's sandbox.
	sandboxServers = "/src/servers"
)

// ErrNoSandbox: local tools are read only inside bubblewrap, and there is
// none.
var ErrNoSandbox = errors.New("bubblewrap (bwrap) not found; local tools are read only inside a sandbox")

type scanResult struct {
	Packages []struct {
		Name      string `json:"name"`
		Doc       string `json:"doc"`
		Functions []struct {
			Name      string `json:"name"`
			Module    string `json:"module"`
			File      string `json:"file"`
			Line      int    `json:"line"`
			Signature string `json:"signature"`
			Doc       string `json:"doc"`
			Source    string `json:"source"`
		} `json:"functions"`
	} `json:"packages"`
	Errors []struct {
		File  string `json:"file"`
		Error string `json:"error"`
	} `json:"errors"`
}

// RefreshLocal rereads the local tools (the hand-written packages of
// LocalServersDir) and updates the catalog. Sandboxed code imports them as
// plain Python; the catalog lists them with their signatures and docstrings
// for search and `tools show`. On error the previous local tools are kept.
func (c *Catalog) RefreshLocal(ctx context.Context) error {
	tools, err := c.readLocal(ctx)
	if err != nil {
		return err
	}
	c.genMu.Lock()
	defer c.genMu.Unlock()
	c.mu.RLock()
	up := maps.Clone(c.upTools)
	old := c.local
	c.mu.RUnlock()
	c.apply(diff(old, tools), up, tools)
	return nil
}

// readLocal runs the scanner over LocalServersDir inside bubblewrap: the
// files are untrusted input to a parser, so the parser gets a read-only view
// of them and of /usr, no network, no other namespaces shared, and dies with
// cexecd. There is deliberately no unsandboxed fallback.
func (c *Catalog) readLocal(ctx context.Context) ([]Tool, error) {
	dir := c.opts.LocalServersDir
	if dir == "-" {
		return nil, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if c.opts.Bwrap == "" {
		return nil, ErrNoSandbox
	}
	if err := executable(c.opts.Bwrap); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoSandbox, c.opts.Bwrap, err)
	}
	python, err := filepath.EvalSymlinks(c.opts.Python)
	if err != nil {
		return nil, fmt.Errorf("python: %w", err)
	}
	if !strings.HasPrefix(python, "/usr/") {
		return nil, fmt.Errorf("python %s resolves to %s, outside /usr, which is all the scanner's sandbox shows", c.opts.Python, python)
	}
	ctx, cancel := context.WithTimeout(ctx, localScanTimeout)
	defer cancel()
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr",
	}
	args = append(args, rootLinks()...)
	args = append(args,
		"--ro-bind", dir, sandboxServers,
		"--tmpfs", "/tmp",
		"--setenv", "LANG", "C.UTF-8",
		"--chdir", "/",
		"--", python, "-I", "-S", "-c", localScanScript, sandboxServers, stubgen.Marker,
	)
	cmd := exec.CommandContext(ctx, c.opts.Bwrap, args...)
	// Killed while it sets up, bwrap would orphan the scanner for ever.
	cmd.Cancel = func() error {
		bwrapproc.Kill(cmd.Process, nil)
		return nil
	}
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &stdout, n: maxLocalScanOutput}
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("read local tools in %s (bwrap %s): %w: %s", dir, c.opts.Bwrap, err, strings.TrimSpace(stderr.String()))
	}
	var res scanResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("read local tools: decode scanner output: %w", err)
	}
	for _, e := range res.Errors {
		c.log.Warn("local tool module skipped", "file", filepath.Join(dir, e.File), "error", e.Error)
	}
	var tools []Tool
	seen := map[string]bool{}
	for _, p := range res.Packages {
		if c.byName[p.Name] != nil {
			c.log.Warn("local tools package skipped: an mcp_server has the same name", "package", p.Name)
			continue
		}
		for _, f := range p.Functions {
			id := p.Name + "/" + f.Name
			if seen[id] {
				c.log.Warn("local tool defined twice; keeping the first", "tool", id, "file", filepath.Join(dir, f.File))
				continue
			}
			seen[id] = true
			tools = append(tools, localTool(dir, p.Name, f.Name, f.Module, f.File, f.Line, f.Signature, f.Doc, f.Source))
		}
	}
	return tools, nil
}

func localTool(dir, pkg, name, module, file string, line int, sig, doc, src string) Tool {
	h := sha256.New()
	for _, s := range []string{module, sig, doc, src} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return Tool{
		ID:          pkg + "/" + name,
		Server:      pkg,
		Name:        name,
		Description: doc,
		Hash:        hex.EncodeToString(h.Sum(nil)),
		Stub: StubInfo{
			Module:    module,
			Function:  name,
			Import:    "from " + module + " import " + name,
			Signature: sig,
			Path:      "servers/" + file,
		},
		Local: &LocalInfo{File: filepath.Join(dir, filepath.FromSlash(file)), Line: line, Source: src},
	}
}

// rootLinks recreates the top-level directories that merged-/usr systems
// make symlinks into /usr (/bin, /lib, ...), and binds them read-only where
// they are real directories.
func rootLinks() []string {
	var args []string
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return args
}

// limitedWriter keeps the first n bytes and fails after, which stops a
// runaway child.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, fmt.Errorf("output larger than the limit")
	}
	l.n -= len(p)
	return l.w.Write(p)
}
