#!/usr/bin/env bash
# PII in tool output becomes tokens for the model; tokens passed back to a
# tool become the real values again.
source "$(dirname "$0")/../lib.sh"
export CEXECCTL
step "over MCP (what a model sees)"
node "$HERE/main.mjs"

step "on disk (the operator's cexecctl exec shows raw output): the real values arrived"
ctl exec -c '
from servers.filesystem import read_text_file
for name in ["forward.txt", "call-back.txt", "other-session.txt"]:
    print(name + ":", read_text_file(path="walkthrough/" + name)["content"])'
