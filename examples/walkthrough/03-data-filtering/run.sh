#!/usr/bin/env bash
# Filter a large tool result in the sandbox; only the summary comes back.
source "$(dirname "$0")/../lib.sh"
step "read 2,000 rows, print three lines"
ctl exec "$HERE/main.py"
