package daemon

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/store"
	"github.com/cexec/cexec/internal/version"
)

// mcpServer is the MCP face as cexecd serves it: on the private unix socket
// next to the control socket and, with an mcp block, on TCP.
type mcpServer struct {
	face *mcpface.Face
	sock string
	// unix is set when the socket is served (its directory is private);
	// socketOff says why it is not.
	unix      bool
	socketOff string
	// listenAddr is the TCP address served, "" without one.
	listenAddr string
	pii        *sessionVaults  // nil without guardrails
	adopter    *sessionAdopter // nil with the files store
	cancel     context.CancelFunc
	served     sync.WaitGroup
	unsub      func()
	log        hclog.Logger
	secrets    *secretPages // pages for workflow questions' secret fields
}

// startMCP builds the face over the daemon's parts and starts serving it.
// Call stop at shutdown; it waits up to grace for calls in flight.
func startMCP(ctx context.Context, cfg *config.Config, svc *services, host *pluginhost.Host, log hclog.Logger, grace time.Duration) (*mcpServer, error) {
	log = log.Named("mcp")
	m := &mcpServer{sock: endpoint.MCPSocket(cfg.Daemon.Socket), log: log, secrets: newSecretPages(log)}
	if svc.store != nil {
		m.adopter = newSessionAdopter(svc.store, log)
	}
	o := m.faceOptions(cfg, svc, host)
	var err error
	if m.face, err = mcpface.New(o); err != nil {
		return nil, err
	}
	unix, tcp, err := m.listen(cfg.MCP.Listen)
	if err != nil {
		return nil, err
	}
	m.serve(ctx, grace, unix, tcp)
	// Stubs are resources: clients re-list them when the catalog changes.
	m.unsub = svc.catalog.Subscribe(func(catalog.Change) { m.face.NotifyResourcesChanged() })
	if svc.store != nil {
		// Skills are resources too: another replica saved one.
		svc.store.Subscribe(store.TopicSkills, func(string) { m.face.NotifyResourcesChanged() })
		// Or may have, while the listener was reconnecting.
		svc.store.OnResync(m.face.NotifyResourcesChanged)
	}
	args := []any{"pii_tokens", o.PII != mcpface.Tokenizer(mcpface.Untokenized{})}
	if unix != nil {
		args = append(args, "socket", m.sock)
	}
	if tcp != nil {
		args = append(args, "listen", m.listenAddr)
	}
	log.Info("mcp face ready", args...)
	return m, nil
}

// faceOptions adapts the daemon's services to what the face consumes.
func (m *mcpServer) faceOptions(cfg *config.Config, svc *services, host *pluginhost.Host) mcpface.Options {
	cv := catalogView{cat: svc.catalog, ws: svc.workspace}
	// The guard layer hides the tools a tenant's policy denies and restores
	// tokens in what agents save; the executor applies it to what they run.
	// Replies carry tokens only when a guard plugin detects PII.
	var pii mcpface.Tokenizer = mcpface.Untokenized{}
	if svc.guards != nil {
		cv.policy = svc.guards.Policy
		m.pii = &sessionVaults{gr: svc.guards, adopter: m.adopter, open: map[vaultOwner]*openVault{}}
		if len(cfg.Pipeline.Guards) > 0 {
			pii = m.pii
		}
	}
	o := mcpface.Options{
		Catalog:     cv,
		Searcher:    searchView{svc: svc.search, v: cv},
		Executor:    mcpExecutor{exec: svc.exec, pii: m.pii, adopter: m.adopter},
		Calls:       mcpExecutor{exec: svc.exec, pii: m.pii, adopter: m.adopter},
		State:       stateView{ws: svc.workspace, pii: m.pii},
		Skills:      skillView{ws: svc.workspace, pii: m.pii},
		Workflows:   workflowView{svc: svc, pii: m.pii, secrets: m.secrets},
		Attachments: attachmentView{ws: svc.workspace},
		PII:         pii,
		Version:     version.Version,
		Logger:      m.log,
		SearchLimit: cfg.Pipeline.SearchLimit,
		OnSessionEnd: func(sc mcpface.Scope) {
			if m.pii != nil {
				m.pii.end(sc)
			}
			// Its persistent interpreter (execute_code's persistent) no
			// longer holds a sandbox back for it.
			if svc.pool != nil {
				svc.pool.EndSession(sc.Tenant, sc.Session)
			}
		},
		// A session opening is the face's sign-in: the tenant's audit log
		// says when and how (socket, loopback, token, oauth).
		OnSessionStart: func(sc mcpface.Scope, auth string) {
			_ = svc.audit.Record(context.Background(), sc.Tenant, audit.Event{Type: audit.TypeSignIn, Session: sc.Session,
				Actor: "agent", Outcome: "ok", Detail: map[string]string{"auth": auth}})
		},
		DefaultTenant: endpoint.DefaultTenant,
		Replica:       cfg.Daemon.Replica,
	}
	if svc.store != nil {
		o.Leases = svc.store
	}
	// execute_task is offered when a code generator is configured.
	if tasks := svc.newTasks(host); tasks != nil && len(cfg.Pipeline.Codegen) > 0 {
		o.Tasks = taskView{tasks}
	}
	o.ApplyConfig(cfg.MCP)
	return o
}

// serve serves the face on each listener until stop.
func (m *mcpServer) serve(ctx context.Context, grace time.Duration, listeners ...net.Listener) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	for _, ln := range listeners {
		if ln == nil {
			continue
		}
		m.served.Go(func() {
			if err := m.face.Serve(sctx, ln, grace); err != nil && !errors.Is(err, net.ErrClosed) {
				m.log.Error("mcp face stopped serving", "address", ln.Addr().String(), "error", err)
			}
		})
	}
}

// stop ends every MCP session, waits for the listeners to close and removes
// the socket.
func (m *mcpServer) stop() {
	m.unsub()
	m.cancel()
	m.served.Wait()
	m.face.Close()
	m.secrets.close()
	if m.pii != nil {
		m.pii.closeAll()
	}
	if m.unix {
		m.removeSocket()
	}
	m.log.Info("mcp face stopped")
}
