#!/usr/bin/env bash
# Builds an OCI image archive of cexecd (make image), without Docker: a Debian
# bookworm root file system from mmdebstrap (variant "essential" plus python3,
# bubblewrap and ca-certificates) with the binaries of `make build` in
# /opt/cexec/bin, where deploy/kubernetes expects them. Writes
#   bin/cexecd-image.tar   named cexec.local/cexecd:<hash>
# and prints "<image> <archive>". <hash> covers this script, oci-archive.sh
# and the binaries, so an unchanged build is not rebuilt.
#
# Load it with `ctr -n k8s.io images import bin/cexecd-image.tar` on a node,
# or push it with `skopeo copy oci-archive:bin/cexecd-image.tar docker://REGISTRY/cexec:TAG`.
# Needs root (mmdebstrap --mode=root) and the Debian mirror.
set -euo pipefail

SUITE=bookworm
PACKAGES=python3,bubblewrap,ca-certificates
MIRROR=${CEXEC_DEBIAN_MIRROR:-http://deb.debian.org/debian}

scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=oci-archive.sh
. "$scripts/oci-archive.sh"
bin=$(dirname "$scripts")/bin
out="$bin/cexecd-image.tar"
[[ -x "$bin/cexecd" ]] || {
	echo "cexecd-image: no $bin/cexecd (run make build)" >&2
	exit 1
}
key=$({
	cat "${BASH_SOURCE[0]}" "$scripts/oci-archive.sh"
	echo "$SUITE $PACKAGES $MIRROR"
	cd "$bin" && sha256sum cexecd cexecctl cexecctl-bench cexec-plugin-*
} | sha256sum | cut -c1-12)
ref="cexec.local/cexecd:$key"
if [[ -f "$out" && "$(cat "$out.ref" 2>/dev/null)" == "$ref" ]]; then
	echo "$ref $out"
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
mmdebstrap --quiet --mode=root --variant=essential --include="$PACKAGES" \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	"$SUITE" "$work/rootfs.tar" "$MIRROR"
mkdir -p "$work/stage/opt/cexec/bin"
cp "$bin"/cexecd "$bin"/cexecctl "$bin"/cexecctl-bench "$bin"/cexec-plugin-* "$work/stage/opt/cexec/bin/"
tar -C "$work/stage" --owner=0 --group=0 --numeric-owner -rf "$work/rootfs.tar" opt/cexec
oci_archive "$work/rootfs.tar" "$ref" \
	'"Env":["PATH=/opt/cexec/bin:/usr/local/bin:/usr/bin:/bin","LANG=C.UTF-8"],"Cmd":["/opt/cexec/bin/cexecd","-config","/etc/cexec/cexec.hcl"]' \
	"$out"
echo "$ref" >"$out.ref"
echo "cexecd-image: built in $((SECONDS - start))s" >&2
echo "$ref $out"
