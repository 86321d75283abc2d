#!/usr/bin/env bash
# cexec as an MCP server, from the TypeScript SDK's client over stdio.
source "$(dirname "$0")/../lib.sh"
export CEXECCTL
step "an MCP client session through 'cexecctl mcp'"
node "$HERE/main.mjs"
