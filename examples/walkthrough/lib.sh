# lib.sh is sourced by every walkthrough example's run.sh.
#
# It finds cexecctl ($CEXECCTL, else bin/cexecctl of this repository after
# `make build`, else cexecctl on PATH) and checks that a daemon answers.
# cexecctl reaches the daemon at $CEXEC_SOCKET (or $CEXECD_ADDRESS), else at
# the default socket that `make run` listens on, so with `make run` in another
# terminal nothing needs setting. CEXEC_TENANT picks the tenant (default
# "default").
set -euo pipefail

WALKTHROUGH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$WALKTHROUGH/../.." && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"

if [ -z "${CEXECCTL:-}" ]; then
  if [ -x "$REPO/bin/cexecctl" ]; then
    CEXECCTL="$REPO/bin/cexecctl"
  else
    CEXECCTL="$(command -v cexecctl || true)"
  fi
fi
if [ -z "$CEXECCTL" ] || [ ! -x "$CEXECCTL" ]; then
  echo "cexecctl not found: run 'make build' or set CEXECCTL" >&2
  exit 2
fi

ctl() { "$CEXECCTL" "$@"; }

# step prints a heading so the output reads as a walkthrough.
step() { printf '\n== %s\n' "$*"; }

if [ -z "${CEXEC_NO_DAEMON_CHECK:-}" ] && ! ctl status >/dev/null; then
  echo "no cexecd answers: start one with 'make run', or set CEXEC_SOCKET to its socket" >&2
  exit 2
fi
