#!/usr/bin/env bash
# Generates the Go code of every .proto under pluginapi/proto and api.
#
#   scripts/proto.sh           # writes beside the .proto files (make proto)
#   scripts/proto.sh --check   # writes to a temporary folder and fails when the
#                              # committed code differs, a generated file is not
#                              # tracked by git, or a committed one is no longer
#                              # generated (make proto-check)
#
# protoc-gen-go and protoc-gen-go-grpc are pinned as go.mod tool dependencies;
# protoc comes from Debian's protobuf-compiler. The "// protoc vX" line that
# protoc-gen-go writes is the only line allowed to differ in --check, so a
# machine with another protoc release does not fail on it.
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
[ "${1:-}" = "--check" ] && check=true
GO=${GO:-go}

gen_go=$($GO tool -n protoc-gen-go)
gen_grpc=$($GO tool -n protoc-gen-go-grpc)

out_root=.
if $check; then
	out_root=$(mktemp -d "${TMPDIR:-/tmp}/cexec-proto-XXXXXX")
	trap 'rm -rf "$out_root"' EXIT
fi

for root in pluginapi/proto api; do
	mkdir -p "$out_root/$root"
	protos=$(cd "$root" && find . -name '*.proto' | sed 's|^\./||' | sort)
	# shellcheck disable=SC2086 # one argument per file
	protoc -I "$root" \
		--plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
		--go_out=paths=source_relative:"$out_root/$root" \
		--go-grpc_out=paths=source_relative:"$out_root/$root" \
		$protos
done
$check || exit 0

stale=0
while IFS= read -r f; do
	rel=${f#"$out_root"/}
	if ! git ls-files --error-unmatch -- "$rel" >/dev/null 2>&1; then
		echo "proto-check: $rel is generated but not tracked by git: run make proto and git add it" >&2
		stale=1
	elif ! diff -q -I '^// 	protoc  ' "$f" "$rel" >/dev/null; then
		echo "proto-check: $rel differs from what make proto writes" >&2
		stale=1
	fi
done < <(find "$out_root" -name '*.pb.go' | sort)
while IFS= read -r rel; do
	if [ ! -f "$out_root/$rel" ]; then
		echo "proto-check: $rel is committed but no .proto generates it any more" >&2
		stale=1
	fi
done < <(git ls-files -- 'pluginapi/proto/*.pb.go' 'api/*.pb.go')
if [ "$stale" -ne 0 ]; then
	echo "generated protobuf code is stale: run make proto and commit" >&2
	exit 1
fi
