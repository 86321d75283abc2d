# shellcheck shell=bash
# Sourced by the image scripts: writes an OCI image layout (oci-layout,
# index.json, a manifest, a config and one gzip layer, all content-addressed)
# as a tar that `ctr images import` reads. Four small JSON documents need no
# extra tool (umoci or skopeo would each be one more package); the image name
# travels in the index's io.containerd.image.name annotation.

# blob FILE: moves FILE into the layout's blobs by its digest, prints the digest.
blob() {
	local d
	d=$(sha256sum "$1" | cut -d' ' -f1)
	mv "$1" "$layout/blobs/sha256/$d"
	echo "$d"
}

# oci_archive LAYER_TAR REF CONFIG_JSON_FRAGMENT OUT: writes OUT, a one-layer
# amd64 image named REF whose config holds CONFIG_JSON_FRAGMENT (members of
# the OCI config's "config" object). Uses the caller's scratch directory $work.
oci_archive() {
	local layer=$1 ref=$2 cfg=$3 out=$4
	layout="${work:?}/layout-${ref##*/}"
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
	mkdir -p "$(dirname "$out")"
	tar -C "$layout" --owner=0 --group=0 --numeric-owner -cf "$out.tmp" oci-layout index.json blobs
	mv "$out.tmp" "$out"
}

