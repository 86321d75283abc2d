#!/bin/sh
# Measures executions through a real daemon, end to end: starts cexecd with
# the default config (cexec.hcl) on a private socket and data directory,
# runs `cexecctl bench exec` and `cexecctl bench mcp` against it and stops
# it. A daemon on the default socket is not disturbed.
#
#   scripts/bench.sh                 # --n 500 --concurrency 8 --paced 20 --json
#   scripts/bench.sh --n 100 --cold 10   # arguments go to bench exec
#   CEXEC_BENCH_DAEMON_CONFIG=my.hcl scripts/bench.sh   # another config than cexec.hcl
#
# Needs `make build` first (make bench does it), and ./data (make data): without
# it cexec.hcl's filesystem server fails and is restarted through npx again
# and again, whose CPU lands in cpu_per_exec_ms.all.
set -eu
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cexec-bench-XXXXXX")
sock="$tmp/cexecd.sock"
bin/cexecd -config "${CEXEC_BENCH_DAEMON_CONFIG:-cexec.hcl}" -socket "$sock" -data-dir "$tmp/data" -log-level warn 2>"$tmp/cexecd.log" &
pid=$!
stop() {
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 130' INT TERM

# shellcheck source-path=SCRIPTDIR/.. source=scripts/wait-daemon.sh
. scripts/wait-daemon.sh
wait_daemon bench "$sock" "$pid" "$tmp/cexecd.log"

[ "$#" -gt 0 ] || set -- --n 500 --concurrency 8 --paced 20 --json
if ! bin/cexecctl --address "$sock" bench exec "$@"; then
	echo "bench: cexecctl bench exec failed; cexecd log:" >&2
	tail -n 50 "$tmp/cexecd.log" >&2
	exit 1
fi

# execute_code of print(1+1) as an agent sends it: MCP over streamable HTTP
# on the daemon's private MCP socket (target p50 <= 5 ms).
if ! bin/cexecctl --address "$sock" bench mcp --json; then
	echo "bench: cexecctl bench mcp failed; cexecd log:" >&2
	tail -n 50 "$tmp/cexecd.log" >&2
	exit 1
fi
