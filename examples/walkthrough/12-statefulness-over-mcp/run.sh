#!/usr/bin/env bash
# State, workspace files and skills outlive MCP calls and MCP sessions.
source "$(dirname "$0")/../lib.sh"
export CEXECCTL
step "two MCP sessions, one after the other"
node "$HERE/main.mjs"
