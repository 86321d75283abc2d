#!/usr/bin/env bash
# Local tools: a Python package in the daemon's servers_dir, found by the
# catalog and search, called in-process by sandboxed code. Driven from Go.
source "$(dirname "$0")/../lib.sh"

step "install the unitconv package into the daemon's servers_dir and refresh"
servers_dir="$(ctl config show --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["cexec"]["servers_dir"])')"
mkdir -p "$servers_dir/unitconv"
cp "$HERE/unitconv/__init__.py" "$servers_dir/unitconv/__init__.py"
echo "copied unitconv/ to $servers_dir"
ctl tools refresh

step "the Go client library lists, searches and runs them"
if [ -n "${WALKTHROUGH_GO_BIN:-}" ]; then
  "$WALKTHROUGH_GO_BIN"
else
  (cd "$REPO" && go run ./examples/walkthrough/11-local-tools)
fi
