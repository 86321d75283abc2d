#!/usr/bin/env bash
# Builds, without Docker or a registry, the two OCI image archives the
# one-node cluster of scripts/test-cluster.sh runs:
#
#   cexec.local/sandbox-python:<hash>  a Debian bookworm root file system made
#       by mmdebstrap (variant "essential" plus python3: what the standard
#       runtime needs; the sandbox-k8s plugin copies the cexec package into
#       the pod at claim time);
#   cexec.local/pause:<hash>           the pod sandbox ("pause") container: a
#       static Go program that sleeps, reaps children and exits on SIGTERM
#       (registry.k8s.io/pause cannot be pulled here).
#
# <hash> is the first 12 hex digits of the SHA-256 of the build steps (the
# functions below and in oci-archive.sh, without comments) and the inputs
# (suite, packages, mirror), so an archive is rebuilt only when one of them
# changes. Archives land in
#   ${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}/images/<name>_<hash>.tar
# Usage: sandbox-image.sh [--names]
# prints "<image> <archive>" for each of the two (sandbox first); with --names
# it only prints them, building nothing.
#
# The OCI archives come from oci-archive.sh (sha256sum and printf, no extra tool).
#
# Needs root (mmdebstrap --mode=root), mmdebstrap, and the Debian mirror.
# Cold: 230 s on 2 loaded cores, nearly all of it mmdebstrap downloading and
# unpacking packages; the archive is 50 MB (gzip -1).
set -euo pipefail

SUITE=bookworm
PACKAGES=python3
MIRROR=${CEXEC_DEBIAN_MIRROR:-http://deb.debian.org/debian}

scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=oci-archive.sh
. "$scripts/oci-archive.sh"
cache_root=${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}
images="$cache_root/images"

build_sandbox() {
	# Documentation, man pages and locales are of no use to programs.
	mmdebstrap --quiet --mode=root --variant=essential --include="$PACKAGES" \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		"$SUITE" "$work/rootfs.tar" "$MIRROR"
	oci_archive "$work/rootfs.tar" "$sandbox_ref" \
		'"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"],"Cmd":["/usr/bin/python3"]' \
		"$sandbox_tar"
}

build_pause() {
	mkdir -p "$work/pause/root" && cd "$work/pause"
	cat >main.go <<-'EOF'
	// Command pause holds a pod's namespaces: it sleeps, reaps orphans and
	// exits on SIGINT or SIGTERM.
	package main

	import (
		"os"
		"os/signal"
		"syscall"
	)

	func main() {
		sig := make(chan os.Signal, 4)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
		for s := range sig {
			if s != syscall.SIGCHLD {
				return
			}
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
	EOF
	GOWORK=off GOFLAGS='' CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o root/pause main.go
	tar -C root --owner=0 --group=0 --numeric-owner -cf "$work/pause.tar" pause
	oci_archive "$work/pause.tar" "$pause_ref" '"Entrypoint":["/pause"]' "$pause_tar"
}

# The functions' text (bash prints it without comments) and the inputs name
# the images.
key=$({ declare -f blob oci_archive build_sandbox build_pause; echo "$SUITE $PACKAGES $MIRROR"; } | sha256sum | cut -c1-12)
sandbox_ref="cexec.local/sandbox-python:$key"
pause_ref="cexec.local/pause:$key"
sandbox_tar="$images/sandbox-python_$key.tar"
pause_tar="$images/pause_$key.tar"

if [[ "${1:-}" == --names ]]; then
	echo "$sandbox_ref $sandbox_tar"
	echo "$pause_ref $pause_tar"
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
[[ -f "$pause_tar" ]] || build_pause
[[ -f "$sandbox_tar" ]] || build_sandbox
# Archives of earlier inputs are of no further use.
find "$images" -maxdepth 1 \( -name 'sandbox-python_*.tar' -o -name 'pause_*.tar' \) \
	! -name "*_$key.tar" -delete
echo "sandbox-image: images ready after $((SECONDS - start))s" >&2
echo "$sandbox_ref $sandbox_tar"
echo "$pause_ref $pause_tar"
