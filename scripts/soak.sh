#!/bin/sh
# The soak and chaos run (make soak): builds the binaries and the harness
# (e2e/soak), which starts its own cexecd on a private socket and data
# directory with 20 tenants and the pinned server-everything, runs 100,000
# executions through the MCP face with a tool call and a state write each,
# SIGKILLs every plugin, the upstream and finally cexecd along the way, and
# prints the figures and the checks. It exits non-zero when a check or a
# bound fails. A daemon on the default socket is not disturbed.
#
#   scripts/soak.sh                          # -n 100000 -tenants 20 -concurrency 8 -chaos
#   scripts/soak.sh -n 2000 -json            # arguments go to the harness (-h lists them)
set -eu
cd "$(dirname "$0")/.."

${MAKE:-make} --no-print-directory build >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cexec-soak-bin-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
${GO:-go} build -o "$tmp/soak" ./e2e/soak
"$tmp/soak" -cexecd bin/cexecd -plugin-dir bin -peers test/peers/node_modules "$@"
