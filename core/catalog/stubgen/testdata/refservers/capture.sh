#!/usr/bin/env bash
# Captures the real tools/list output of the MCP reference servers into JSON fixtures, so the
# stub generation tests run without npm. Run it again after bumping the package versions:
#
#   npm install --prefix /tmp/refservers @modelcontextprotocol/server-filesystem \
#       @modelcontextprotocol/server-memory @modelcontextprotocol/server-everything
#   core/catalog/stubgen/testdata/refservers/capture.sh /tmp/refservers
#
# It speaks MCP over stdio (JSON-RPC, one message per line): initialize, then
# notifications/initialized, then tools/list (following nextCursor), and writes
# <server>-<version>.json = {"server", "package", "version", "tools": [...]} next to itself.
set -euo pipefail

prefix=${1:?usage: capture.sh NPM_PREFIX}
out=$(cd "$(dirname "$0")" && pwd)
mods=$prefix/node_modules/@modelcontextprotocol
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

capture() { # capture SERVER PACKAGE ARGS...
	local server=$1 pkg=$2
	shift 2
	local dir=$mods/$pkg version tools='[]' cursor='' id=1 line
	version=$(jq -r .version "$dir/package.json")
	coproc SRV { cd "$root" && MEMORY_FILE_PATH=$root/memory.jsonl exec node "$dir/dist/index.js" "$@" 2>/dev/null; }
	echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cexec-capture","version":"1"}}}' >&"${SRV[1]}"
	read -r line <&"${SRV[0]}"
	echo '{"jsonrpc":"2.0","method":"notifications/initialized"}' >&"${SRV[1]}"
	while :; do
		id=$((id + 1))
		if [ -z "$cursor" ]; then
			echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"method\":\"tools/list\"}" >&"${SRV[1]}"
		else
			jq -cn --argjson id "$id" --arg c "$cursor" '{jsonrpc:"2.0",id:$id,method:"tools/list",params:{cursor:$c}}' >&"${SRV[1]}"
		fi
		# Skip notifications and log messages until our response arrives.
		while read -r line <&"${SRV[0]}"; do
			[ "$(jq -r '.id // empty' <<<"$line")" = "$id" ] && break
		done
		tools=$(jq -c --argjson acc "$tools" '$acc + .result.tools' <<<"$line")
		cursor=$(jq -r '.result.nextCursor // empty' <<<"$line")
		[ -n "$cursor" ] || break
	done
	kill "$SRV_PID" 2>/dev/null || true
	wait "$SRV_PID" 2>/dev/null || true
	jq -n --arg s "$server" --arg p "@modelcontextprotocol/$pkg" --arg v "$version" --argjson t "$tools" \
		'{server: $s, package: $p, version: $v, tools: $t}' >"$out/$pkg-$version.json"
	echo "$out/$pkg-$version.json: $(jq length <<<"$tools") tools"
}

mkdir -p "$root/data"
capture filesystem server-filesystem "$root/data"
capture memory server-memory
capture everything server-everything stdio
