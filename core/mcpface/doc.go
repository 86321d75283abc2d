// Package mcpface is cexecd's MCP server (ARCHITECTURE §6): what agents see
// instead of hundreds of upstream tools. It offers eight tools
// (search_tools, list_tools, execute_code, call_tool, execute_task when a
// code generator is configured, state, skills, workflow; reads and writes
// of one kind share a tool, since every tool's schema costs every agent's
// context) whose descriptions teach the workflow (search at full detail →
// write one program that prints only what matters, or call_tool for a
// single call) in about 730 tokens (a test holds it under 1,000), and
// the stub tree (cexec://servers/<pkg>/<tool>.py, local tools' modules
// read-only from the servers folder) and skills (cexec://skills/<name>) as resources. What a program shows
// (cexec.show) follows execute_code's text as image, audio or resource
// content; an item too large to travel inline is a resource link to
// cexec://workspace/<path>, served by AttachmentStore to its tenant only
// (attachments.go). It is built on github.com/mark3labs/mcp-go.
//
// # Services
//
// The face owns no state beyond sessions; daemon.Run gives it the daemon's
// parts through small interfaces (service.go): Catalog (servers, tools,
// stub source, local tools' modules), Searcher (tools and shared skills;
// the face matches the tenant's own skills, which no index holds, itself),
// Executor (execute_code), ToolCaller (call_tool,
// optional), TaskRunner (execute_task, optional), StateStore (with
// VersionedState, the state tool reports versions and takes one),
// SkillStore and Tokenizer (the PII
// vault). Every method gets a Scope: the tenant and the session.
// Everything a tool or resource returns passes Tokenizer; identifiers
// (server, tool, skill names and URIs) are left as they are so they can be
// used again.
//
// # Transports and tenants
//
// One http.Handler serves streamable HTTP on /mcp and, with Options.SSE,
// the 2024-11-05 HTTP+SSE transport on /sse and /message. Serve it on two
// kinds of listener:
//
//   - ListenUnix(endpoint.MCPSocket(cfg.Daemon.Socket)): a 0600 socket in
//     the daemon's private socket directory. Only the daemon's user reaches
//     it, so the X-Cexec-Tenant header picks the tenant (default
//     Options.DefaultTenant). `cexecctl mcp` relays stdio here.
//   - ListenTCP(cfg.MCP.Listen) when the mcp block sets one: the bearer
//     token decides the tenant (tokens compared in constant time); without
//     tokens only loopback addresses are served, as the default tenant.
//     ListenTCP and Serve refuse a non-loopback address without tokens.
//   - With Options.OAuth the face is also an OAuth 2.1 resource server
//     (oauth.go): a bearer token that is not a static one must be a JWT
//     access token signed by the issuer's keys (JWKS, discovered from its
//     RFC 8414/OpenID metadata, cached, refreshed on an unknown kid at most
//     every 30 s), for the configured audience, not expired; its tenant is
//     the configured claim. 401s point at the RFC 9728 metadata, served
//     without a token at /.well-known/oauth-protected-resource[/path].
//
// On every listener the Origin header must be absent or in
// Options.AllowedOrigins (on loopback listeners also the face's own origin;
// any other localhost origin is refused: every local web page has one), and
// on loopback listeners the Host header must be a local name (DNS
// rebinding). A session id is bound to the tenant
// that opened it and is the cexec session id (a valid workspace session
// id); it dies on DELETE, after Options.SessionIdleTTL idle, or at
// shutdown, and Options.OnSessionEnd hears of it. With Options.Replica
// ids start with the replica's id and a dot, the hint a proxy routes on;
// with Options.Leases a request for a session this replica does not hold
// gets 421 naming the live replica that does, or 404 (initialize again)
// when that replica is gone (replica.go). Options.OnSessionStart hears of
// a session's opening and how it authenticated (the audit log's sign-in).
// Protocol revisions
// 2024-11-05 to 2025-11-25 are served, over SSE too (revisions.go);
// 2026-07-28 removed sessions, so its clients negotiate down.
//
// No client can starve the face: every listener has header, read and idle
// timeouts (no write timeout, which would cut streams); a TCP listener
// closes connections over Options.MaxConnections or MaxConnectionsPerPeer as
// it accepts them; a refused request closes its connection; bodies over
// Options.MaxRequestBody get 413; a tenant with MaxSessionsPerTenant live
// sessions gets 429 on initialize.
//
// # Wiring in daemon.Run
//
//	o := mcpface.Options{
//		Catalog: catalogView, Searcher: searchView, Executor: pipelineExec,
//		Tasks: taskRunner, // nil when no codegen plugin is configured
//		State: stateView, Skills: skillView, PII: vaultTokenizer,
//		Version: version.Version, Logger: log.Named("mcp"),
//		SearchLimit: cfg.Pipeline.SearchLimit,
//		OnSessionEnd: func(sc mcpface.Scope) { /* drop the session's interpreter, close its vault */ },
//	}
//	o.ApplyConfig(cfg.MCP)
//	face, err := mcpface.New(o)
//	ln, err := mcpface.ListenUnix(endpoint.MCPSocket(cfg.Daemon.Socket)) // after claiming the control socket
//	go face.Serve(ctx, ln, grace)
//	if cfg.MCP.Listen != "" {
//		tcp, err := face.ListenTCP(cfg.MCP.Listen)
//		go face.Serve(ctx, tcp, grace)
//	}
//	catalog.Subscribe(func(catalog.Change) { face.NotifyResourcesChanged() })
//
// Remove the MCP socket at shutdown, like the control socket.
//
// # Asking the agent's user
//
// Every tool handler's context carries an Asker (AskerFrom): the daemon
// hands it to the executions the call starts, and upstream servers'
// elicitations and policy approvals reach the user of this client, on this
// session, through mcp-go's RequestElicitation (on the call's own response
// stream). A client that did not declare elicitation, or not the mode asked
// for, is not asked: Elicit fails with ErrCannotElicit before sending.
//
// # Results
//
// Failures are isError results with a message that says what to do (an
// unknown server lists the known ones, a mistyped tool gets a suggestion).
// Replies carry what the model needs and no more. execute_code's text is
// the output (its middle cut above Options.MaxOutput, a long line keeping its
// head and tail, and saying so), stderr and the cexec.result() value; a
// failure adds the traceback (the program's frames, the message once), the
// exit code and the tool calls it does not explain. ExecOutput in
// structuredContent says the same compactly, with the rounded duration and
// the session only when the call chose another. list_tools(server, tool) shows a stub's
// types, signature and docstring; argument errors are sentences.
//
// # Long runs
//
// A tools/call with a progress token gives the Executor (and ToolCaller) a
// ProgressFunc (progress.go): its reports, worded and tokenized by the
// executor, go out as notifications/progress on the client's session.
// notifications/cancelled cancels the handler's context (mcp-go). execute_code
// declares taskSupport optional: a task-augmented call gets a
// CreateTaskResult at once, and the client polls tasks/get and tasks/result,
// which mcp-go serves; tasks.go keeps the run alive past the request, stops
// it on tasks/cancel or the session's end, and caps a task's ttl at TaskTTL.
package mcpface
