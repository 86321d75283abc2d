package msb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// serverBackend talks to a 0.2-era `msb server`. Its sandboxes cannot
// mount read-only, so the runtime and the read-only /cexec directories are
// copied into the guest under guest_dir when a sandbox is created (later
// changes to the stub tree reach sandboxes created afterwards); writable
// mounts (the tenant's workspace) are volumes, which are paths on the
// server's machine: on another machine they must be shared storage at the
// same paths.
type serverBackend struct {
	s   *settings
	log hclog.Logger
	rpc *rpcClient
}

func newServerBackend(s *settings, log hclog.Logger) *serverBackend {
	return &serverBackend{s: s, log: log, rpc: &rpcClient{url: s.url, key: s.apiKey, hc: &http.Client{
		// No overall timeout: the zygote's command lasts as long as the
		// sandbox; every call has its context.
		Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second},
	}}}
}

func (b *serverBackend) close() { b.rpc.hc.CloseIdleConnections() }

// probe checks that the server answers and accepts the API key.
func (b *serverBackend) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := b.rpc.health(ctx); err != nil {
		return err
	}
	// A fresh server fails metrics with HTTP 500 until its first sandbox
	// exists; only a refused key or no answer makes it unusable.
	if _, err := b.rpc.metrics(ctx); err != nil && (!authenticated(err) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	return nil
}

// serverName is the server's name of sandbox id: 0.2 servers accept at
// most 63 letters, digits, '-' and '_'.
func serverName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "cexec-" + hex.EncodeToString(sum[:8])
}

// create starts a sandbox, copies the runtime and the read-only mounts into
// it and starts its runtime.
func (b *serverBackend) create(ctx context.Context, sp *spec) (box, error) {
	name := serverName(sp.id)
	libDir := path.Join(b.s.guestDir, "lib")
	// The runtime's order: the tenant's workspace before the shared tree
	// (both after the standard library), servers only from the shared tree.
	zc := zygoteConfig(b.s, libDir, []string{guestWorkspace, b.s.guestDir}, false, sp)
	zc.Packages = runtime.StandardPackages(guestWorkspace, b.s.guestDir)
	env := zc.Env()
	for k, v := range sp.env {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	cfg := startConfig{Image: b.s.image, Memory: sp.memoryMB, CPUs: sp.cpus, Workdir: guestWorkspace}
	for _, k := range sortedKeys(env) {
		cfg.Envs = append(cfg.Envs, k+"="+env[k])
	}
	type copyJob struct {
		src, dst string
	}
	var copies []copyJob
	hasWorkspace := false
	for _, m := range sp.mounts {
		if !m.ReadOnly {
			cfg.Volumes = append(cfg.Volumes, m.Source+":"+m.Target)
			hasWorkspace = hasWorkspace || m.Target == guestWorkspace
			continue
		}
		dst, ok := guestTarget(b.s.guestDir, m.Target)
		if !ok || !isDir(m.Source) {
			return nil, fmt.Errorf("%w: read-only mount at %s: a 0.2 msb server cannot mount read-only, so the backend copies read-only directories into the guest, which it does for directories under /cexec only",
				pluginapi.ErrInvalidArgument, m.Target)
		}
		copies = append(copies, copyJob{m.Source, dst})
	}
	bctx, cancel := context.WithTimeout(ctx, b.s.bootTimeout)
	defer cancel()
	msg, err := b.rpc.start(bctx, name, cfg)
	if err != nil {
		b.stopQuietly(name)
		return nil, err
	}
	if strings.Contains(msg, "couldn't verify") || strings.Contains(msg, "timed out") {
		b.log.Warn("the msb server is not sure the sandbox runs; trying it", "sandbox", name, "message", msg)
	}
	fail := func(err error) (box, error) {
		b.stopQuietly(name)
		return nil, err
	}
	dirs := []string{b.s.guestDir}
	if !hasWorkspace {
		dirs = append(dirs, guestWorkspace)
	}
	if err := b.guestCommand(bctx, name, append([]string{"-I", "-S", "-c", mkdirSrc}, dirs...)); err != nil {
		return fail(fmt.Errorf("prepare the guest: %w", err))
	}
	if err := b.copyIn(bctx, name, libDir, runtime.Files()); err != nil {
		return fail(err)
	}
	for _, c := range copies {
		if err := b.copyIn(bctx, name, c.dst, os.DirFS(c.src)); err != nil {
			return fail(err)
		}
	}
	if b.s.serverExec == serverExecREPL {
		return &replBox{b: b, vmName: name, guestDir: b.s.guestDir, limits: sp.limits}, nil
	}
	bx, err := startRelayBox(bctx, b, name, zc, sp.limits)
	if err != nil {
		return fail(err)
	}
	return bx, nil
}

// stopQuietly stops a sandbox that failed to start, logging failures.
func (b *serverBackend) stopQuietly(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.rpc.stop(ctx, name); err != nil {
		b.log.Debug("stop sandbox that failed to start", "sandbox", name, "error", err)
	}
}

// stop stops a sandbox. The server answers a stop of a sandbox it does not
// run (one stopped behind cexec's back, say) with its generic HTTP 500;
// such a sandbox is gone, which is what stop is for.
func (b *serverBackend) stop(ctx context.Context, name string) error {
	err := b.rpc.stop(ctx, name)
	if err == nil {
		return nil
	}
	if use, uerr := b.usage(ctx); uerr == nil && !use[name].running {
		return nil
	}
	return err
}

// usage reads sandbox.metrics.get.
func (b *serverBackend) usage(ctx context.Context) (map[string]usage, error) {
	list, err := b.rpc.metrics(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]usage, len(list))
	for _, s := range list {
		u := usage{running: s.Running}
		if s.MemoryUsage != nil {
			u.rssBytes = *s.MemoryUsage << 20
		}
		out[s.Name] = u
	}
	return out, nil
}

// envArgs turns an environment into `env` arguments, sorted.
func envArgs(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}
