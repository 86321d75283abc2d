#!/usr/bin/env bash
# Files through the filesystem server, and files in the tenant's workspace.
source "$(dirname "$0")/../lib.sh"
step "write, edit, inspect and search files"
ctl exec "$HERE/main.py"
