// Package policy decodes and enforces a tenant's policy block of
// cexec.hcl: which upstream tools may be called, with which arguments, how
// many times per execution, how much output may go back to the model,
// which code is refused outright, and whether an unavailable guard plugin
// fails closed.
//
// # Schema
//
//	tenant "acme" {
//	  policy {
//	    strict         = true                 # a guard plugin down: deny (default false: allow, log a warning)
//	    pii_fail_open  = false                # a guard that cannot detect: send model-facing output untokenized (default false: withhold it)
//	    max_tool_calls = 50                   # per execution (default unlimited)
//	    max_output     = "1MiB"               # bytes back to the model, after tokenization (default unlimited)
//
//	    allow = ["filesystem/*", "memory"]    # when set, a tool must match one of these
//	    deny  = ["memory/delete_*"]           # deny wins over allow
//
//	    deny_code = ["\\bsubprocess\\b", "os\\.system"]   # RE2 (HCL strings: \\ is one backslash); defence in depth only
//
//	    constraint "filesystem/write_file" {
//	      argument = "path"
//	      prefix   = "/data/out/"             # paths are cleaned first: no "/data/out/../etc"
//	    }
//	    constraint "payments/transfer" {
//	      argument = "amount"
//	      required = true
//	      min      = 0
//	      max      = 100
//	    }
//	    constraint "mail/send" {
//	      argument = "to"
//	      pattern  = "@example\\.com$"
//	    }
//	    constraint "*/set_mode" {
//	      argument = "options.mode"           # dots reach into objects
//	      one_of   = ["read", "write"]
//	    }
//
//	    approval {                            # calls wait for a person's yes
//	      annotations = ["destructiveHint"]   # or readOnlyHint, idempotentHint, openWorldHint
//	      tools       = ["payments/*"]        # tool patterns; either list may be left out
//	      timeout     = "2m"                  # default 5m; then the call is refused
//	    }
//	  }
//	}
//
// Tool patterns are "server" (all its tools) or "server/tool"; both parts
// are path.Match globs. A constraint applies to every tool its pattern
// matches; several may apply to one tool and all must hold. A constraint
// checks its argument only when the call has it, unless required = true.
// When the argument is a list, each element is checked ("paths[2]").
// prefix and pattern want strings, min and max numbers; one_of compares
// numbers and booleans by their text.
//
// An approval block matches a tool by pattern or by an annotation hint
// that holds for it, with the MCP specification's defaults for hints the
// server left out (a tool is destructive and open-world unless it says
// otherwise; a read-only tool is never destructive). Policy.Approval
// returns the first block that matches; the pipeline asks and waits.
//
// The tenant block's allowed_servers (core/config, enforced by the
// workspace) still applies; allow and deny refine it to tools.
//
// # Decoding
//
// Decode(tenant.Policy) and DecodeTenants(cfg) return hcl.Diagnostics
// with file:line ranges: unknown attributes, wrong types, malformed
// patterns and regular expressions (per list element), min above max,
// constraints that check nothing.
//
// # Enforcement
//
// Every check returns nil or a *Violation, which wraps pluginapi.ErrDenied
// and reads like
//
//	policy: filesystem/write_file argument "path" must start with "/data/out/"
//	policy: tool memory/delete_entities is denied by deny pattern "memory/delete_*"
//	policy: execution exceeded max_tool_calls (50)
//
// Messages name the rule and the argument, never an argument's value.
// CheckArguments wants the real arguments (after untokenizing), because
// the point is where data actually goes. deny_code is not a sandbox: code
// can assemble any string at run time, so it only refuses obvious
// attempts early with a clear message; the sandbox is the boundary.
package policy
