#!/usr/bin/env bash
# Runs every fuzz target of the module briefly (FUZZTIME each, default 5s):
# a short pass in make test that keeps the targets building and catches a
# shallow crash; longer runs are `go test -fuzz NAME -fuzztime 10m ./PKG`.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}

n=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "fuzz: $pkg $name ($FUZZTIME)"
	if ! out=$($GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1); then
		printf '%s\n' "$out" | tail -n 30 >&2
		echo "fuzz: $pkg $name failed; the input is in $pkg/testdata/fuzz/$name (commit it as a seed once fixed); rerun: $GO test -run '^\$' -fuzz '^${name}\$' $pkg" >&2
		exit 1
	fi
	n=$((n + 1))
done < <(git grep -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed 's/:func /:/' | sort)
echo "fuzz: $n targets, $FUZZTIME each"
