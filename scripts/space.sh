#!/usr/bin/env bash
# Checks, before `make test`, that the disk has room for the run: besides
# its caches, a run writes up to about 2 GiB of build and test files into
# TMPDIR and about 2 GiB of new entries into the Go build cache (measured:
# a cold run on an empty machine uses 11 GiB in all, 7 of it the Go build
# cache with the kube-apiserver build in it). A run that fills the disk
# fails in whatever test writes next, with "no space left on device".
#
# When less than CEXEC_TEST_SPACE_GIB (default 4) is free, it empties the Go
# build cache, which grows with every commit built and is trimmed by Go only
# of entries unused for five days; the kube-apiserver and etcd binaries
# (scripts/k8s-binaries.sh) and the module cache stay. It warns when that
# is still not enough, and leaves the run to go on: a warm run may fit.
set -euo pipefail
cd "$(dirname "$0")/.."

need=${CEXEC_TEST_SPACE_GIB:-4}
go=${GO:-go}
tmp=${TMPDIR:-/tmp}
cache=$($go env GOCACHE)

# free_gib prints the free space, in whole GiB, of the file system holding $1.
free_gib() {
	df -P -B1G "$1" | awk 'NR == 2 { print $4 }'
}

low() {
	local d
	for d in "$tmp" "$cache"; do
		[ -d "$d" ] || continue
		if [ "$(free_gib "$d")" -lt "$need" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

dir=$(low) || exit 0
size=$(du -sh "$cache" 2>/dev/null | cut -f1)
echo "space: $(free_gib "$dir") GiB free on the file system of $dir, under the $need GiB a test run needs; emptying the Go build cache ($size in $cache)" >&2
$go clean -cache
if dir=$(low); then
	echo "space: still only $(free_gib "$dir") GiB free on the file system of $dir; the run may fail with \"no space left on device\"" >&2
fi
