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
# <hash> is the first 12 hex digits of the SHA-256 of this script and its
# inputs (suite, packages, mirror), so an archive is rebuilt only when one of
# them changes. Archives land in
#   ${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}/images/<name>_<hash>.tar
# Usage: sandbox-image.sh [--names]
# prints "<image> <archive>" for each of the two (sandbox first); with --names
# it only prints them, building nothing.
#
# The OCI layout (oci-layout, index.json, a manifest, a config and one gzip
# layer, all content-addressed) is written here with sha256sum and printf:
# four small JSON documents need no extra tool (umoci or skopeo would be one
# more package), and `ctr images import` reads the layout as a tar.
#
# Needs root (mmdebstrap --mode=root), mmdebstrap, and the Debian mirror.
# Cold: about COLD_IMAGE.
set -euo pipefail

SUITE=bookworm
PACKAGES=python3
MIRROR=${CEXEC_DEBIAN_MIRROR:-http://deb.debian.org/debian}

cache_root=${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}
images="$cache_root/images"
key=$({ cat "${BASH_SOURCE[0]}"; echo "$SUITE $PACKAGES $MIRROR"; } | sha256sum | cut -c1-12)
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

# blob FILE: moves FILE into the layout's blobs by its digest, prints the digest.
blob() {
	local d
	d=$(sha256sum "$1" | cut -d' ' -f1)
	mv "$1" "$layout/blobs/sha256/$d"
	echo "$d"
}

# oci_archive LAYER_TAR REF CONFIG_JSON_FRAGMENT OUT: a one-layer image.
oci_archive() {
	local layer=$1 ref=$2 cfg=$3 out=$4
	layout="$work/layout-${ref##*/}"
	rm -rf "$layout" && mkdir -p "$layout/blobs/sha256"
	local diff_id layer_digest layer_size
	diff_id=$(sha256sum "$layer" | cut -d' ' -f1)
	gzip -n -1 -c "$layer" >"$work/layer.gz"
	layer_size=$(stat -c %s "$work/layer.gz")
	layer_digest=$(blob "$work/layer.gz")
	printf '{"architecture":"amd64","os":"linux","config":{%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$cfg" "$diff_id" >"$work/config.json"
	local config_size config_digest
	config_size=$(stat -c %s "$work/config.json")
	config_digest=$(blob "$work/config.json")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
		"$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
	local manifest_size manifest_digest
	manifest_size=$(stat -c %s "$work/manifest.json")
	manifest_digest=$(blob "$work/manifest.json")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$manifest_digest" "$manifest_size" "$ref" "${ref##*:}" >"$layout/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
	mkdir -p "$images"
	tar -C "$layout" --owner=0 --group=0 --numeric-owner -cf "$out.tmp" oci-layout index.json blobs
	mv "$out.tmp" "$out"
}

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
	GOWORK=off GOFLAGS= CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o root/pause main.go
	tar -C root --owner=0 --group=0 --numeric-owner -cf "$work/pause.tar" pause
	oci_archive "$work/pause.tar" "$pause_ref" '"Entrypoint":["/pause"]' "$pause_tar"
}

start=$SECONDS
[[ -f "$pause_tar" ]] || build_pause
[[ -f "$sandbox_tar" ]] || build_sandbox
echo "sandbox-image: images ready after $((SECONDS - start))s" >&2
echo "$sandbox_ref $sandbox_tar"
echo "$pause_ref $pause_tar"
