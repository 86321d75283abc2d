// Package guard is the host's guard layer (ARCHITECTURE.md §3.1): guard
// plugins decide and detect; the host tokenizes, keeps the per-session
// vault (package vault) and enforces each tenant's policy (package
// policy). Everything that goes to the model is tokenized; tokens coming
// back in code and tool arguments are restored.
//
// # Wiring
//
// At start-up, after the plugin host has started:
//
//	policies, diags := policy.DecodeTenants(cfg)       // also in `cexecd validate`
//	store, err := vault.NewStore(vault.Options{DataDir: cfg.Daemon.DataDir, Logger: log})
//	var guards []guard.Named
//	for _, name := range cfg.Pipeline.Guards {
//		g, err := host.Guard(name)                    // supervised handle
//		if err != nil {
//			guards = append(guards, guard.Named{Name: name, Plugin: guard.Missing(err)})
//			continue
//		}
//		guards = append(guards, guard.Named{Name: name, Plugin: g})
//	}
//	gr, err := guard.New(guard.Options{Guards: guards, Policies: policies, Vaults: store, Logger: log})
//
// For execute_code:
//
//	s, err := gr.Open(tenant, session)
//	defer s.Close()
//	code, err := s.PrepareCode(ctx, agentCode)   // tokens restored, deny_code + guards' CheckCode
//	x := s.Begin()
//	// for each call_tool from the sandbox (after schema validation):
//	args, err := x.ToolCall(ctx, server, tool, rawArgs)  // count, allow/deny, untokenize, constraints, guards
//	// send args upstream; return the result to the sandbox untouched
//	texts, result, err := s.TokenizeTexts(ctx, []string{stdout, stderr}, result) // one detection
//	result, err = x.ChargeJSON(result)            // over max_output is an error
//	stdout = x.Charge(texts[0])                   // cut to max_output
//	msg, err := s.Tokenize(ctx, err.Error())      // error texts too
//
// For the MCP face relaying an upstream result: s.TokenizeJSON(ctx, result).
// To hide tools a tenant may not call: gr.Policy(tenant).CheckTool(server, tool).
//
// Errors that deny wrap pluginapi.ErrDenied: *policy.Violation for the
// policy, *Denial for a guard plugin. Their messages name the rule, guard
// and argument but no value, and are meant for the agent (tokenize them
// like any other output). Any other error from Tokenize or
// TokenizeTexts means the text must not be sent at all.
//
// # Unavailable guards
//
// A guard hook a plugin does not implement is skipped. A guard that fails
// (stopped, restarting, a required = false guard that never started, any
// error other than a denial) denies when the tenant's policy has strict =
// true, with a *Denial naming the guard and wrapping the cause (so
// errors.Is(err, pluginapi.ErrPluginShutdown) holds); otherwise the call
// goes on without that guard and a warning is logged. For Detect, strict
// means output is withheld rather than sent with PII unchecked.
//
// Code checks (deny_code, a guard's CheckCode) are defence in depth: code
// can build any string at run time, so the sandbox is the boundary that
// holds.
package guard
