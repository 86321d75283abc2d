package catalog

import (
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
	"path/filepath"
	"strings"
	"time"

	"github.com/cexec/cexec/core/catalog/stubgen"
)

//go:embed localscan.py
var localScanScript string

const (
	// localScanTimeout bounds reading the local tools, sandbox creation
	// included.
	localScanTimeout = 20 * time.Second
	// maxLocalScanOutput bounds the scanner's JSON.
	maxLocalScanOutput = 16 << 20
	// maxLocalFile bounds a local tools file read for an agent, as the
	// scanner bounds the files it parses.
	maxLocalFile = 1 << 20
)

// ErrNoSandbox: local tools are read only inside a sandbox, and there is
// none.
var ErrNoSandbox = errors.New("no sandbox backend; local tools are read only inside a sandbox")

// ScanRequest is one run of the local tools' scanner.
type ScanRequest struct {
	// Dir is the host folder the program reads.
	Dir string
	// Program returns self-contained Python source that reads the folder at
	// root and prints one JSON document on stdout; the runner passes where
	// it shows Dir.
	Program func(root string) string
	// MaxOutput bounds the program's output; more is an error.
	MaxOutput int64
}

// Scanner runs the local tools' scanner in a sandbox that shows nothing of
// the host but req.Dir (read-only), has no network and holds no secrets,
// and returns the program's stdout. The daemon implements it over the
// configured sandbox backend.
type Scanner interface {
	Scan(ctx context.Context, req ScanRequest) ([]byte, error)
}

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

// readLocal runs the scanner over LocalServersDir in a sandbox: the files
// are untrusted input to a parser, so the parser gets a read-only view of
// them and nothing else. There is deliberately no unsandboxed fallback.
func (c *Catalog) readLocal(ctx context.Context) ([]Tool, error) {
	dir := c.opts.LocalServersDir
	if dir == "-" {
		return nil, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if c.opts.Scanner == nil {
		return nil, ErrNoSandbox
	}
	ctx, cancel := context.WithTimeout(ctx, localScanTimeout)
	defer cancel()
	out, err := c.opts.Scanner.Scan(ctx, ScanRequest{
		Dir:       dir,
		Program:   scanProgram,
		MaxOutput: maxLocalScanOutput,
	})
	if err != nil {
		return nil, fmt.Errorf("read local tools in %s: %w", dir, err)
	}
	var res scanResult
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("read local tools: decode scanner output: %w", err)
	}
	for _, e := range res.Errors {
		c.log.Warn("local tool module skipped", "file", filepath.Join(dir, e.File), "error", e.Error)
	}
	var tools []Tool
	seen := map[string]bool{}
	for _, p := range res.Packages {
		if c.set().byName[p.Name] != nil {
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

// LocalFile returns a file of LocalServersDir by its path in the stub tree
// (servers/<package>/<file>, a local tool's Stub.Path). The folder is
// written by hand, not by cexecd, so the read goes through os.Root: a path
// with .. or a symlink that leaves the folder is refused, not followed.
func (c *Catalog) LocalFile(path string) ([]byte, error) {
	dir := c.opts.LocalServersDir
	rel, ok := strings.CutPrefix(path, "servers/")
	if dir == "-" || !ok {
		return nil, fmt.Errorf("local tools file %s: %w", path, fs.ErrNotExist)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("local tools file %s: %w", path, err)
	}
	defer func() { _ = root.Close() }()
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("local tools file %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("local tools file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("local tools file %s is not a regular file: %w", path, fs.ErrNotExist)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxLocalFile+1))
	if err != nil {
		return nil, fmt.Errorf("local tools file %s: %w", path, err)
	}
	if len(data) > maxLocalFile {
		return nil, fmt.Errorf("local tools file %s is larger than %d bytes", path, maxLocalFile)
	}
	return data, nil
}

// scanProgram is the scanner with its call appended; JSON strings are valid
// Python string literals.
func scanProgram(root string) string {
	r, _ := json.Marshal(root)
	m, _ := json.Marshal(stubgen.Marker)
	return localScanScript + "\nmain(" + string(r) + ", " + string(m) + ")\n"
}
