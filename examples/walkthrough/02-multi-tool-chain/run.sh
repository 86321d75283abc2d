#!/usr/bin/env bash
# Chain tools of two servers in one program.
source "$(dirname "$0")/../lib.sh"
step "list, read, store and read back, in one execution"
ctl exec "$HERE/main.py"
