#!/usr/bin/env bash
# Loops, branches and ToolError handling around tool calls.
source "$(dirname "$0")/../lib.sh"
step "one program, many decisions"
ctl exec "$HERE/main.py"
