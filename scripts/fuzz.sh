#!/usr/bin/env bash
# Runs every fuzz target of the module briefly (FUZZTIME each, default 5s):
# a short pass in make test that keeps the targets building and catches a
# shallow crash; longer runs are `go test -fuzz NAME -fuzztime 10m ./PKG`.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime expires while a worker is mid-call on a loaded
# machine (go.dev/issue/75804, fixed in Go 1.27). A real finding always
# writes its input to testdata/fuzz, so such a run is retried once and, if it
# happens again, reported as a flake rather than a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}

# deadline_flake: the output of a failed run is the coordinator's deadline
# race and nothing else.
deadline_flake() {
	grep -q 'context deadline exceeded' <<<"$1" &&
		! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$1"
}

n=0
flakes=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "fuzz: $pkg $name ($FUZZTIME)"
	for try in 1 2; do
		if out=$($GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1); then
			break
		fi
		if deadline_flake "$out"; then
			if [ "$try" -eq 2 ]; then
				echo "fuzz: $pkg $name: the fuzz coordinator's deadline race twice, no input found (go.dev/issue/75804)" >&2
				flakes=$((flakes + 1))
			fi
			continue
		fi
		printf '%s\n' "$out" | tail -n 30 >&2
		echo "fuzz: $pkg $name failed; the input is in $pkg/testdata/fuzz/$name (commit it as a seed once fixed); rerun: $GO test -run '^\$' -fuzz '^${name}\$' $pkg" >&2
		exit 1
	done
	n=$((n + 1))
done < <(git grep -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed 's/:func /:/' | sort)
echo "fuzz: $n targets, $FUZZTIME each ($flakes deadline flakes)"
