// Package store keeps in PostgreSQL what cexecd replicas share, when
// cexec.hcl says `store { kind = "postgres" }`:
//
//   - session leases: MCP session id → the replica that serves it, kept
//     alive by each replica's heartbeat, so a replica that gets another's
//     session can tell a live owner (the balancer misrouted) from a dead one
//     (the client must re-initialize), and count a tenant's sessions for
//     mcp.max_sessions_per_tenant, reserving the new session's lease in
//     the same transaction under a per-tenant advisory lock;
//   - per-tenant concurrency slots, so max_concurrent holds across
//     replicas; a dead replica's slots stop counting when its heartbeat
//     stops;
//   - per-tenant disk usage (cexec_usage), so disk_quota holds for the
//     tenant's one folder on the shared volume: the last walk by any
//     replica plus host writes reserved since, each reservation checked
//     and added in one statement; the next walk replaces what a dead
//     replica reserved and never wrote;
//   - PII vaults, encrypted at rest with AES-256-GCM under a key from the
//     config (the tenant and session are the additional data, so a row
//     cannot be moved to another session);
//   - the skills registry (name, description, who saved it when);
//   - the tool calls waiting for an operator, so that `cexecctl approvals`
//     on any replica lists and decides those of every live replica, whose
//     replica hears the decision by notification (or reads it back);
//   - change notifications (LISTEN/NOTIFY on one channel) that tell other
//     replicas to drop what they cache: a vault one replica saved, a skill
//     one replica added.
//
// Workspaces (state files, skills' code, session logs) stay files on a
// volume the replicas share; state saves are made safe there by
// core/workspace's versioned saves and its state lock. The default store
// is files alone, as with one cexecd: then this package is not used.
//
// Consumers define the small interfaces they need (core/mcpface's
// SessionLeases, core/workspace's Slots and SharedUsage,
// core/guard/vault's Persister); core/daemon passes a *Postgres to each.
//
// The schema is created on Open (CREATE ... IF NOT EXISTS under an
// advisory lock, so replicas starting together do not race).
package store
