#!/usr/bin/env bash
# One HCL file configures cexecd; mistakes are reported with file:line:col.
source "$(dirname "$0")/../lib.sh"

step "a config with a tenant policy checks clean"
ctl config check "$HERE/tenant-policy.hcl"

step "a config with mistakes: every diagnostic names its line"
if ctl config check "$HERE/broken.hcl" 2>&1; then
  echo "broken.hcl was accepted?" >&2
  exit 1
fi

step "the running daemon's effective config (secrets would show as (sensitive))"
ctl config show --json | python3 "$HERE/show.py"

step "the plugins it runs"
ctl plugins ls
