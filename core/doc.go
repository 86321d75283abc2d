// Package core holds no code: its subpackages are the cexecd daemon, and
// only cmd/cexecd imports them.
//
//   - daemon wires the rest together: Run and Validate, the control socket,
//     the MCP face's listeners and the views that adapt services to it.
//   - config loads cexec.hcl; pluginhost launches and supervises the
//     plugins it names; pool keeps warm sandboxes over the sandbox backend.
//   - catalog connects the upstream MCP servers and lists their tools and
//     the local ones; bridge routes sandboxed code's tool calls to them.
//   - pipeline runs execute_code and execute_task; guard is the policy and
//     PII layer it applies; search is search_tools over the selector.
//   - workspace keeps tenants' state, skills and session logs.
//   - control is the gRPC control API; mcpface is the MCP server agents use.
//   - version is the build version.
package core
