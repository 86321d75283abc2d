package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

const (
	// scanTenant is the tenant the backend lists the scanner's sandbox
	// under; it is no workspace tenant and gets none of their mounts.
	scanTenant = "cexec-catalog"
	// scanServers is where the scanner's sandbox shows the servers folder.
	scanServers = "/src/servers"
	// scanDestroyTimeout bounds destroying the scanner's sandbox.
	scanDestroyTimeout = 10 * time.Second
)

// scanLocal reads the local tools into the catalog in the background; set
// stopScan to end it. A failed scan leaves the catalog without local tools
// and says why in the log, as a failed start of an optional upstream does.
func (s *services) scanLocal(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.stopScan = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		start := time.Now()
		err := s.catalog.RefreshLocal(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			s.log.Warn("local tools skipped", "error", err)
		default:
			s.log.Debug("local tools read", "elapsed", time.Since(start).Round(time.Millisecond))
		}
	}()
}

// sandboxes finds the sandbox backend by name; the plugin host does.
type sandboxes interface {
	Sandbox(name string) (sandbox.Sandbox, error)
}

// sandboxScanner runs the catalog's local tools scanner in a sandbox of the
// configured backend, created for the one scan and destroyed after it: the
// servers folder read-only, no network, no environment and no workspace.
type sandboxScanner struct {
	plugins sandboxes
	backend string
}

func (s sandboxScanner) Scan(ctx context.Context, req catalog.ScanRequest) ([]byte, error) {
	if s.backend == "" {
		return nil, fmt.Errorf("%w: none is configured", catalog.ErrNoSandbox)
	}
	sb, err := s.plugins.Sandbox(s.backend)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", catalog.ErrNoSandbox, s.backend, err)
	}
	id := scanID()
	diags, err := sb.Create(ctx, sandbox.CreateRequest{
		ID:     id,
		Tenant: scanTenant,
		Mounts: []sandbox.Mount{{Source: req.Dir, Target: scanServers, ReadOnly: true}},
		Limits: sandbox.Limits{OutputBytes: req.MaxOutput},
	})
	if err == nil && diags.HasErrors() {
		err = diags
	}
	if err != nil {
		return nil, fmt.Errorf("create scanner sandbox (backend %s): %w", s.backend, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scanDestroyTimeout)
		defer cancel()
		// A failed destroy leaves the sandbox to the backend's own cleanup;
		// the scan's result stands.
		_ = sb.Destroy(dctx, id)
	}()
	var out scanOutput
	res, err := sb.Exec(ctx, sandbox.ExecRequest{SandboxID: id, Code: req.Program(scanServers)}, &out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("run scanner: %w", err)
	case res.Error != nil:
		return nil, fmt.Errorf("scanner failed: %s: %s: %s", res.Error.Type, res.Error.Message, strings.TrimSpace(out.stderr.String()))
	case res.OutputTruncated:
		return nil, fmt.Errorf("scanner output larger than %d bytes", req.MaxOutput)
	}
	return out.stdout.Bytes(), nil
}

func scanID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "scan-" + hex.EncodeToString(b[:])
}

// scanOutput collects the scanner's output and refuses its host calls: the
// scanner calls no tools.
type scanOutput struct {
	stdout, stderr bytes.Buffer
}

func (o *scanOutput) Output(stream sandbox.Stream, data []byte) error {
	if stream == sandbox.Stderr {
		o.stderr.Write(data)
		return nil
	}
	o.stdout.Write(data)
	return nil
}

func (o *scanOutput) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, &sandbox.CallError{Type: "PermissionError", Message: "the local tools scanner makes no host calls"}
}
