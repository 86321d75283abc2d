package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/catalog/stubgen"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/guard/policy"
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/mcpface/mcpclient"
	"github.com/cexec/cexec/core/pipeline"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/search"
	"github.com/cexec/cexec/core/version"
	"github.com/cexec/cexec/core/workspace"
	"github.com/cexec/cexec/pluginapi"
)

// mcpServer is the MCP face as cexecd serves it: on the private unix socket
// next to the control socket and, with an mcp block, on TCP.
type mcpServer struct {
	face *mcpface.Face
	sock string
	// unix is set when the socket is served (its directory is private).
	unix   bool
	pii    *sessionVaults // nil without guardrails
	cancel context.CancelFunc
	served sync.WaitGroup
	unsub  func()
	log    hclog.Logger
}

// startMCP builds the face over the daemon's parts and starts serving it.
// Call stop at shutdown; it waits up to grace for calls in flight.
func startMCP(ctx context.Context, cfg *config.Config, svc *services, host *pluginhost.Host, log hclog.Logger, grace time.Duration) (*mcpServer, error) {
	log = log.Named("mcp")
	m := &mcpServer{sock: mcpclient.SocketPath(cfg.Daemon.Socket), log: log}
	cv := catalogView{cat: svc.catalog, ws: svc.workspace}
	// The guard layer hides the tools a tenant's policy denies and restores
	// tokens in what agents save; the executor applies it to what they run.
	// Replies carry tokens only when a guard plugin detects PII.
	var pii mcpface.Tokenizer = mcpface.Untokenized{}
	if svc.guards != nil {
		cv.policy = svc.guards.Policy
		m.pii = &sessionVaults{gr: svc.guards, open: map[vaultOwner]map[string]*guard.Session{}}
		if len(cfg.Pipeline.Guards) > 0 {
			pii = m.pii
		}
	}
	o := mcpface.Options{
		Catalog:     cv,
		Searcher:    searchView{svc: svc.search, v: cv},
		Executor:    mcpExecutor{exec: svc.exec, pii: m.pii},
		State:       stateView{ws: svc.workspace, pii: m.pii},
		Skills:      skillView{ws: svc.workspace, pii: m.pii},
		PII:         pii,
		Version:     version.Version,
		Logger:      log,
		SearchLimit: cfg.Pipeline.SearchLimit,
		OnSessionEnd: func(sc mcpface.Scope) {
			if m.pii != nil {
				m.pii.end(sc)
			}
		},
		DefaultTenant: DefaultTenant,
	}
	// execute_task is offered when a code generator is configured.
	if tasks := svc.newTasks(host); tasks != nil && len(cfg.Pipeline.Codegen) > 0 {
		o.Tasks = taskView{tasks}
	}
	o.ApplyConfig(cfg.MCP)
	var err error
	if m.face, err = mcpface.New(o); err != nil {
		return nil, err
	}

	var unix, tcp net.Listener
	if err := ownerOnly(filepath.Dir(m.sock)); err != nil {
		// The unix socket trusts its tenant header, so only the daemon's
		// user may reach it. The control socket asks less of its
		// directory, and the daemon stays useful without MCP.
		log.Error("not serving MCP on the unix socket: cexecctl mcp cannot connect", "socket", m.sock, "error", err)
	} else if unix, err = mcpface.ListenUnix(m.sock); err != nil {
		return nil, err
	}
	if cfg.MCP.Listen != "" {
		if tcp, err = m.face.ListenTCP(cfg.MCP.Listen); err != nil {
			if unix != nil {
				_ = unix.Close()
				m.removeSocket()
			}
			return nil, err
		}
	}
	m.unix = unix != nil
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	for _, ln := range []net.Listener{unix, tcp} {
		if ln == nil {
			continue
		}
		m.served.Go(func() {
			if err := m.face.Serve(sctx, ln, grace); err != nil && !errors.Is(err, net.ErrClosed) {
				log.Error("mcp face stopped serving", "address", ln.Addr().String(), "error", err)
			}
		})
	}
	// Stubs are resources: clients re-list them when the catalog changes.
	m.unsub = svc.catalog.Subscribe(func(catalog.Change) { m.face.NotifyResourcesChanged() })
	args := []any{"pii_tokens", pii != mcpface.Tokenizer(mcpface.Untokenized{})}
	if unix != nil {
		args = append(args, "socket", m.sock)
	}
	if tcp != nil {
		args = append(args, "listen", tcp.Addr().String())
	}
	log.Info("mcp face ready", args...)
	return m, nil
}

// stop ends every MCP session, waits for the listeners to close and removes
// the socket.
func (m *mcpServer) stop() {
	m.unsub()
	m.cancel()
	m.served.Wait()
	if m.pii != nil {
		m.pii.closeAll()
	}
	if m.unix {
		m.removeSocket()
	}
	m.log.Info("mcp face stopped")
}

// ownerOnly checks that dir is accessible to its owner alone (mode 0700).
func ownerOnly(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("its directory %s has mode %04o; make it 0700 (under systemd: RuntimeDirectoryMode=0700)", dir, perm)
	}
	return nil
}

func (m *mcpServer) removeSocket() {
	if err := os.Remove(m.sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("cannot remove mcp socket", "socket", m.sock, "error", err)
	}
}

// vaultOwner is the MCP session that opened vaults: they stay open until it
// ends.
type vaultOwner struct{ tenant, session string }

// sessionVaults is the face's Tokenizer over the guardrails: one vault per
// cexec session, held open for the MCP session that uses it, so every call
// of a session agrees on its tokens and the vault is written once the
// session ends rather than reloaded per call.
type sessionVaults struct {
	gr *guard.Guardrails

	mu sync.Mutex
	// open maps an MCP session to the guard sessions it opened, by cexec
	// session (its own, and those execute_code was asked to continue).
	open map[vaultOwner]map[string]*guard.Session
}

// session returns the guard session of sc, opening it for the MCP session
// the request belongs to.
func (v *sessionVaults) session(ctx context.Context, sc mcpface.Scope) (*guard.Session, error) {
	owner := vaultOwner{tenant: sc.Tenant, session: sc.Session}
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		owner.session = cs.SessionID()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.open[owner][sc.Session]; s != nil {
		return s, nil
	}
	s, err := v.gr.Open(sc.Tenant, sc.Session)
	if err != nil {
		return nil, fmt.Errorf("open pii vault: %w", err)
	}
	if v.open[owner] == nil {
		v.open[owner] = map[string]*guard.Session{}
	}
	v.open[owner][sc.Session] = s
	return s, nil
}

// end closes the vaults an MCP session opened.
func (v *sessionVaults) end(sc mcpface.Scope) {
	v.mu.Lock()
	held := v.open[vaultOwner{tenant: sc.Tenant, session: sc.Session}]
	delete(v.open, vaultOwner{tenant: sc.Tenant, session: sc.Session})
	v.mu.Unlock()
	for _, s := range held {
		_ = s.Close()
	}
}

func (v *sessionVaults) closeAll() {
	v.mu.Lock()
	open := v.open
	v.open = map[vaultOwner]map[string]*guard.Session{}
	v.mu.Unlock()
	for _, held := range open {
		for _, s := range held {
			_ = s.Close()
		}
	}
}

// Tokenize replaces the PII in text with the session's tokens.
func (v *sessionVaults) Tokenize(ctx context.Context, sc mcpface.Scope, text string) (string, error) {
	s, err := v.session(ctx, sc)
	if err != nil {
		return "", err
	}
	return s.Tokenize(ctx, text)
}

// TokenizeJSON tokenizes every string of value.
func (v *sessionVaults) TokenizeJSON(ctx context.Context, sc mcpface.Scope, value json.RawMessage) (json.RawMessage, error) {
	s, err := v.session(ctx, sc)
	if err != nil {
		return nil, err
	}
	return s.TokenizeJSON(ctx, value)
}

// TokenizeReply tokenizes a reply's text and structured value with one
// detection.
func (v *sessionVaults) TokenizeReply(ctx context.Context, sc mcpface.Scope, text string, structured json.RawMessage) (string, json.RawMessage, error) {
	s, err := v.session(ctx, sc)
	if err != nil {
		return "", nil, err
	}
	return s.TokenizeTextJSON(ctx, text, structured)
}

// catalogView is the catalog as one tenant sees it: upstream servers its
// allowed_servers name, local tool packages, and only the tools its policy
// lets it call.
type catalogView struct {
	cat *catalog.Catalog
	ws  *workspace.Manager
	// policy is nil without guardrails.
	policy func(tenant string) *policy.Policy
}

// visibility returns whether the tenant of sc may see a tool.
func (v catalogView) visibility(sc mcpface.Scope) (func(t *catalog.Tool) bool, error) {
	ten, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	var p *policy.Policy
	if v.policy != nil {
		p = v.policy(sc.Tenant)
	}
	return func(t *catalog.Tool) bool {
		// allowed_servers limits call_tool; local tools are plain imports.
		if t.Local == nil && !ten.Allowed(t.Server) {
			return false
		}
		return p == nil || p.CheckTool(t.Server, t.Name) == nil
	}, nil
}

// Servers lists the upstream servers the tenant may use, in config order,
// then the local tool packages.
func (v catalogView) Servers(_ context.Context, sc mcpface.Scope) ([]mcpface.Server, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return nil, err
	}
	ten, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	pkgs := map[string]string{}
	var local []string
	for _, t := range v.cat.Tools() {
		if t.Local != nil && pkgs[t.Server] == "" {
			local = append(local, t.Server)
		}
		if p := stubPackage(t.Stub.Module); p != "" {
			pkgs[t.Server] = p
		}
		if visible(&t) {
			counts[t.Server]++
		}
	}
	statuses := v.cat.Servers()
	var named []stubgen.Server
	for _, s := range statuses {
		if pkgs[s.Name] == "" {
			named = append(named, stubgen.Server{Name: s.Name})
		}
	}
	// A server without tools has no stubs yet; its package is the name the
	// stub generator will give it.
	for _, p := range stubgen.Generate(named) {
		pkgs[p.Server] = p.Name
	}
	var out []mcpface.Server
	for _, s := range statuses {
		if !ten.Allowed(s.Name) {
			continue
		}
		srv := mcpface.Server{Name: s.Name, Package: pkgs[s.Name], State: string(s.State), Tools: counts[s.Name]}
		if s.State != catalog.StateReady {
			srv.Error = s.LastError
		}
		out = append(out, srv)
	}
	for _, name := range local {
		if counts[name] > 0 {
			out = append(out, mcpface.Server{Name: name, Package: pkgs[name], State: "local", Tools: counts[name]})
		}
	}
	return out, nil
}

// stubPackage is the package of a stub module: servers.<package>.<function>.
func stubPackage(module string) string {
	parts := strings.Split(module, ".")
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

// Tools lists the tools of one server, or of all when server is "".
func (v catalogView) Tools(_ context.Context, sc mcpface.Scope, server string) ([]mcpface.Tool, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return nil, err
	}
	var out []mcpface.Tool
	known := server == ""
	for _, t := range v.cat.Tools() {
		if server != "" && t.Server != server {
			continue
		}
		if !visible(&t) {
			continue
		}
		known = true
		out = append(out, faceTool(&t))
	}
	if !known {
		// A configured upstream server without tools yet is known but
		// empty; anything else is unknown to this tenant.
		ten, err := v.ws.Tenant(sc.Tenant)
		if err != nil {
			return nil, err
		}
		if _, ok := v.cat.Server(server); !ok || !ten.Allowed(server) {
			return nil, fmt.Errorf("server %q: %w", server, pluginapi.ErrNotFound)
		}
	}
	return out, nil
}

func faceTool(t *catalog.Tool) mcpface.Tool {
	return mcpface.Tool{
		Server:      t.Server,
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		Import:      t.Stub.Import,
		Signature:   t.Stub.Signature,
		Path:        t.Stub.Path,
	}
}

// StubSource returns the tool's stub module (a local tool's function).
func (v catalogView) StubSource(_ context.Context, sc mcpface.Scope, server, tool string) (string, error) {
	visible, err := v.visibility(sc)
	if err != nil {
		return "", err
	}
	t, ok := v.cat.Tool(server, tool)
	if !ok || !visible(&t) {
		return "", fmt.Errorf("tool %s/%s: %w", server, tool, pluginapi.ErrNotFound)
	}
	src, ok := v.cat.StubSource(t.ID)
	if !ok {
		return "", fmt.Errorf("tool %s/%s: its stub is being generated; try again in a moment: %w", server, tool, pluginapi.ErrUnavailable)
	}
	return string(src), nil
}

// searchView is search_tools over the search service (the selector
// plugin, or its substring fallback), limited to the tenant's servers.
type searchView struct {
	svc *search.Service
	v   catalogView
}

// Search returns up to limit tools, best first. The face keeps only the
// hits the tenant may use, so a few more are asked for, in case its policy
// hides some.
func (s searchView) Search(ctx context.Context, sc mcpface.Scope, query string, limit int) ([]mcpface.Hit, error) {
	if s.svc == nil {
		return nil, fmt.Errorf("tool search is not running; list_servers and get_server_tools still work: %w", pluginapi.ErrUnavailable)
	}
	ten, err := s.v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	req := search.Request{Query: query, Detail: search.DetailName, Limit: min(2*limit, search.MaxLimit), Kinds: []string{search.KindTool}}
	if ten.Quota().AllowedServers != nil {
		servers, err := s.v.Servers(ctx, sc)
		if err != nil {
			return nil, err
		}
		if len(servers) == 0 {
			return nil, nil
		}
		for _, srv := range servers {
			req.Servers = append(req.Servers, srv.Name)
		}
	}
	res, err := s.svc.Search(ctx, req)
	if err != nil {
		return nil, err
	}
	hits := make([]mcpface.Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		hits = append(hits, mcpface.Hit{Server: h.Server, Tool: h.Name, Score: h.Score})
	}
	return hits, nil
}

// mcpExecutor is execute_code: MCP sessions are cexec sessions, and the
// pipeline's guard layer restores PII tokens in the code and in tool-call
// arguments and vets both against the tenant's policy and the guards.
type mcpExecutor struct {
	exec *pipeline.Executor
	// pii is nil without guardrails.
	pii *sessionVaults
}

// Execute runs code for sc.
func (e mcpExecutor) Execute(ctx context.Context, sc mcpface.Scope, code string) (mcpface.Execution, error) {
	if e.exec == nil {
		return mcpface.Execution{}, fmt.Errorf("no sandbox backend is running; the operator can check `cexecctl plugins ls`: %w", pluginapi.ErrUnavailable)
	}
	res, err := e.exec.ExecuteCode(ctx, pipeline.CodeRequest{Tenant: sc.Tenant, Session: sc.Session, Code: code, ModelFacing: true})
	if err != nil {
		return mcpface.Execution{}, err
	}
	return faceExecution(res), nil
}

// taskView is execute_task: the pipeline searches, generates, guards,
// runs and repairs in the MCP session's cexec session. Generators only see
// the task tokenized; the result comes back restored and the face
// tokenizes it once, as everything else it returns.
type taskView struct{ tasks *pipeline.Tasks }

// RunTask turns task into a program and runs it.
func (t taskView) RunTask(ctx context.Context, sc mcpface.Scope, task string) (mcpface.TaskResult, error) {
	res, err := t.tasks.ExecuteTask(ctx, pipeline.TaskRequest{Tenant: sc.Tenant, Session: sc.Session, Task: task})
	if err != nil {
		return mcpface.TaskResult{}, err
	}
	out := mcpface.TaskResult{Code: res.Code}
	var why []string
	for _, a := range res.Attempts {
		if a.Code != "" {
			out.Attempts++
		}
		if a.Error != "" {
			why = append(why, a.Generator+": "+a.Error)
		}
	}
	if res.Exec == nil {
		for _, d := range res.Diagnostics {
			why = append(why, strings.TrimSpace(d.Summary+": "+d.Detail))
		}
		sentinel := pluginapi.ErrInvalidArgument
		if res.Status == pipeline.TaskDenied {
			sentinel = pluginapi.ErrDenied
		}
		return mcpface.TaskResult{}, fmt.Errorf("no program ran (%s): %s; write one with execute_code instead: %w",
			res.Status, strings.Join(why, "; "), sentinel)
	}
	out.Execution = faceExecution(res.Exec)
	return out, nil
}

func faceExecution(res *pipeline.CodeResult) mcpface.Execution {
	ex := mcpface.Execution{
		Stdout:          string(res.Stdout),
		Stderr:          string(res.Stderr),
		OutputTruncated: res.OutputTruncated,
		Result:          res.Result,
		TimedOut:        res.TimedOut,
		Duration:        res.Elapsed,
		Tokenized:       res.Tokenized,
		Calls: mcpface.ToolCalls{
			Calls:   res.Summary.Calls,
			Failed:  res.Summary.Failed,
			Refused: res.Summary.Refused,
			TotalMS: res.Summary.TotalMS,
		},
	}
	if res.Error != nil {
		ex.Error = &mcpface.ExecError{Type: res.Error.Type, Message: res.Error.Message, Traceback: res.Error.Traceback}
	}
	for _, t := range res.Summary.Tools {
		ex.Calls.Tools = append(ex.Calls.Tools, mcpface.ToolStat{Server: t.Server, Tool: t.Tool, Calls: t.Calls,
			Failed: t.Failed, TotalMS: t.TotalMS, MaxMS: t.MaxMS, LastError: t.LastError})
	}
	if res.QuotaError != nil {
		// The program ran; the agent should know its workspace is full.
		ex.Stderr += fmt.Sprintf("\ncexec: %v; delete files under /workspace", res.QuotaError)
	}
	return ex
}

// stateView is the tenant's state through the face. Values the agent saves
// may hold tokens it was shown; they are stored with the real values.
type stateView struct {
	ws  *workspace.Manager
	pii *sessionVaults
}

// ListState lists the tenant's state files.
func (v stateView) ListState(_ context.Context, sc mcpface.Scope) ([]mcpface.StateFile, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	files, err := t.ListState()
	if err != nil {
		return nil, err
	}
	out := make([]mcpface.StateFile, len(files))
	for i, f := range files {
		out[i] = mcpface.StateFile{Name: f.Name, Size: f.Size, Modified: f.Modified}
	}
	return out, nil
}

// GetState returns a state value as JSON.
func (v stateView) GetState(_ context.Context, sc mcpface.Scope, name string) (json.RawMessage, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	return t.GetState(name)
}

// SaveState stores a value, its tokens restored.
func (v stateView) SaveState(ctx context.Context, sc mcpface.Scope, name string, value json.RawMessage) error {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return err
	}
	if v.pii != nil {
		s, err := v.pii.session(ctx, sc)
		if err != nil {
			return err
		}
		if value, err = s.UntokenizeJSON(value); err != nil {
			return err
		}
	}
	_, err = t.SaveState(name, value)
	return err
}

// skillView is the tenant's skills and the shared ones through the face.
type skillView struct {
	ws  *workspace.Manager
	pii *sessionVaults
}

func faceSkill(s workspace.Skill) mcpface.Skill {
	return mcpface.Skill{Name: s.Name, Description: s.Description, Import: s.Import, Shared: s.Shared,
		Instructions: s.Instructions, Code: s.Code}
}

// ListSkills lists the skills the tenant can import.
func (v skillView) ListSkills(_ context.Context, sc mcpface.Scope) ([]mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	skills, err := t.ListSkills()
	if err != nil {
		return nil, err
	}
	out := make([]mcpface.Skill, len(skills))
	for i, s := range skills {
		out[i] = faceSkill(s)
	}
	return out, nil
}

// GetSkill returns one skill with its instructions and code.
func (v skillView) GetSkill(_ context.Context, sc mcpface.Scope, name string) (mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return mcpface.Skill{}, err
	}
	s, err := t.GetSkill(name)
	if err != nil {
		return mcpface.Skill{}, err
	}
	return faceSkill(s), nil
}

// SaveSkill stores a tenant skill. Tokens in its code are restored: the
// skill outlives the session whose vault knows them.
func (v skillView) SaveSkill(ctx context.Context, sc mcpface.Scope, name, description, code string) (mcpface.Skill, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return mcpface.Skill{}, err
	}
	if v.pii != nil {
		s, err := v.pii.session(ctx, sc)
		if err != nil {
			return mcpface.Skill{}, err
		}
		if code, err = s.Vault().UntokenizePython(code); err != nil {
			return mcpface.Skill{}, err
		}
	}
	s, err := t.SaveSkill(ctx, name, description, code)
	if err != nil {
		return mcpface.Skill{}, err
	}
	return faceSkill(s), nil
}
