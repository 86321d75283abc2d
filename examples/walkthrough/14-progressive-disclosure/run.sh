#!/usr/bin/env bash
# From server names to one tool's full signature, a step at a time.
source "$(dirname "$0")/../lib.sh"
export CEXECCTL
step "over MCP: list_tools, then search_tools at growing detail"
node "$HERE/main.mjs"

step "the same from the command line"
ctl tools search --detail name --limit 3 "create entities in the knowledge graph"
