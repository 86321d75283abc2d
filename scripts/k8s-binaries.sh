#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that the sandbox-k8s envtest
# tests run (controller-runtime's envtest downloader needs the internet; this
# needs only the Go module proxy). Versions are pinned here; the binaries land in
#   ${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}/<versions>/
# and the script prints that directory on its last line. It is a no-op when
# both binaries are already there; with --dir it only prints the directory.
#
# kube-apiserver comes from k8s.io/kubernetes, whose go.mod points its staging
# modules (k8s.io/api, k8s.io/client-go, ...) at ./staging, which a dependent
# module cannot use: a throwaway module replaces each of them by its published
# v0.x version. etcd is a three-line main around etcdmain.Main.
#
# Cold cost: kube-apiserver takes about 11 minutes on 2 idle cores (31 minutes
# at nice 19 on 2 cores with a load average above 20); etcd about 2 minutes
# (142 s under that load). Later runs reuse the Go build cache as well.
set -euo pipefail

K8S_VERSION=1.34.4
ETCD_VERSION=3.6.16

cache_root=${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}
dir="$cache_root/v$K8S_VERSION-etcd$ETCD_VERSION"
if [[ "${1:-}" == --dir ]]; then
	echo "$dir"
	exit 0
fi
if [[ -x "$dir/kube-apiserver" && -x "$dir/etcd" ]]; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local
ldflags='-s -w'

build_apiserver() {
	local m="$work/apiserver"
	mkdir -p "$m" && cd "$m"
	go mod init cexec.local/k8s-binaries/apiserver >/dev/null 2>&1
	local gomod
	gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[[ -f "$gomod" ]] || { echo "k8s-binaries: no go.mod for k8s.io/kubernetes@v$K8S_VERSION" >&2; return 1; }
	# Every "k8s.io/X => ./staging/src/k8s.io/X" becomes "k8s.io/X => k8s.io/X v0.<minor>.<patch>".
	local staging
	staging=$(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*|\1|p' "$gomod")
	[[ -n "$staging" ]] || { echo "k8s-binaries: no staging replaces in $gomod" >&2; return 1; }
	local mod
	for mod in $staging; do
		go mod edit -replace "$mod=$mod@v0.${K8S_VERSION#1.}"
	done
	go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION"
	# The version the server reports (/version), as a release build sets it.
	local v=k8s.io/component-base/version minor=${K8S_VERSION#1.}
	go build -trimpath -ldflags "$ldflags -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=${minor%%.*} -X $v.gitTreeState=clean" \
		-o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
	mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
}

build_etcd() {
	local m="$work/etcd"
	mkdir -p "$m" && cd "$m"
	go mod init cexec.local/k8s-binaries/etcd >/dev/null 2>&1
	cat >main.go <<-'EOF'
	package main

	import (
		"os"

		"go.etcd.io/etcd/server/v3/etcdmain"
	)

	func main() { etcdmain.Main(os.Args) }
	EOF
	go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
	go mod tidy
	go build -trimpath -ldflags "$ldflags" -o "$dir/etcd.tmp" .
	mv "$dir/etcd.tmp" "$dir/etcd"
}

start=$SECONDS
[[ -x "$dir/etcd" ]] || build_etcd
echo "k8s-binaries: etcd v$ETCD_VERSION ready after $((SECONDS - start))s" >&2
[[ -x "$dir/kube-apiserver" ]] || build_apiserver
echo "k8s-binaries: kube-apiserver v$K8S_VERSION ready after $((SECONDS - start))s" >&2
echo "$dir"
