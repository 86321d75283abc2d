#!/usr/bin/env bash
# Discover a tool, read its stub, and call it from a program.
source "$(dirname "$0")/../lib.sh"

step "the upstream servers cexecd is connected to"
ctl servers ls

step "find a tool for a task (search_tools)"
ctl tools search --limit 3 "read a text file"

step "the Python stub a program imports"
ctl tools show filesystem/read_text_file | sed -n '/^def read_text_file/,/^    """$/p'

step "call it from a sandboxed program"
ctl exec "$HERE/main.py"
