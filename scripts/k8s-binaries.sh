#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that the sandbox-k8s envtest
# tests run (controller-runtime's envtest downloader needs the internet; this
# needs only the Go module proxy). Versions are pinned here; the binaries land in
#   ${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}/<versions>/
# and the script prints that directory on its last line. It is a no-op when
# both binaries are already there; with --dir it only prints the directory.
#
# With --node it also builds what scripts/test-cluster.sh runs a one-node
# cluster with: kubelet, kube-scheduler and kube-controller-manager (its
# garbage collector deletes a released claim's Sandbox and pod, which the
# agent-sandbox controller leaves to owner references) from the same
# k8s.io/kubernetes version, kubectl (to look into that cluster), and
# agent-sandbox-controller-v<version> from sigs.k8s.io/agent-sandbox
# (cmd/agent-sandbox-controller, extensions included).
#
# kube-apiserver comes from k8s.io/kubernetes, whose go.mod points its staging
# modules (k8s.io/api, k8s.io/client-go, ...) at ./staging, which a dependent
# module cannot use: a throwaway module replaces each of them by its published
# v0.x version. etcd is a three-line main around etcdmain.Main.
#
# Cold cost: kube-apiserver takes about 11 minutes on 2 idle cores (31 minutes
# at nice 19 on 2 cores with a load average above 20); etcd about 2 minutes
# (142 s under that load). Later runs reuse the Go build cache as well.
# --node adds 38 minutes cold at nice 19 under load (plugins/sandbox-k8s/README.md).
set -euo pipefail

K8S_VERSION=1.34.4
ETCD_VERSION=3.6.16
AGENT_SANDBOX_VERSION=0.5.6

node=false
if [[ "${1:-}" == --node ]]; then
	node=true
	shift
fi

cache_root=${CEXEC_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cexec/k8s}
dir="$cache_root/v$K8S_VERSION-etcd$ETCD_VERSION"
if [[ "${1:-}" == --dir ]]; then
	echo "$dir"
	exit 0
fi
node_bins=(kubelet kube-scheduler kube-controller-manager kubectl "agent-sandbox-controller-v$AGENT_SANDBOX_VERSION")
have_all() {
	local b
	for b in kube-apiserver etcd; do [[ -x "$dir/$b" ]] || return 1; done
	$node || return 0
	for b in "${node_bins[@]}"; do [[ -x "$dir/$b" ]] || return 1; done
}
if have_all; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local
ldflags='-s -w'

# k8s_module makes the current directory a module that can build commands of
# k8s.io/kubernetes (its staging replaces rewritten).
k8s_module() {
	go mod init "cexec.local/k8s-binaries/$1" >/dev/null 2>&1
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
}

# k8s_build builds k8s.io/kubernetes/cmd/$1 with the version it reports
# (/version, --version) set as a release build sets it.
k8s_build() {
	local v=k8s.io/component-base/version minor=${K8S_VERSION#1.}
	go build -trimpath -ldflags "$ldflags -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=${minor%%.*} -X $v.gitTreeState=clean" \
		-o "$dir/$1.tmp" "k8s.io/kubernetes/cmd/$1"
	mv "$dir/$1.tmp" "$dir/$1"
}

build_apiserver() {
	mkdir -p "$work/apiserver" && cd "$work/apiserver"
	k8s_module apiserver
	go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION"
	k8s_build kube-apiserver
}

build_node() {
	mkdir -p "$work/node" && cd "$work/node"
	k8s_module node
	local c
	for c in kubelet kube-scheduler kube-controller-manager kubectl; do
		go get "k8s.io/kubernetes/cmd/$c@v$K8S_VERSION"
	done
	for c in kubelet kube-scheduler kube-controller-manager kubectl; do
		[[ -x "$dir/$c" ]] || k8s_build "$c"
		echo "k8s-binaries: $c v$K8S_VERSION ready after $((SECONDS - start))s" >&2
	done
}

# The controller's own go.mod has no replaces, so a module that requires it
# builds its main package as released.
build_agent_sandbox() {
	mkdir -p "$work/agent-sandbox" && cd "$work/agent-sandbox"
	go mod init cexec.local/k8s-binaries/agent-sandbox >/dev/null 2>&1
	go get "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller@v$AGENT_SANDBOX_VERSION"
	local out="$dir/agent-sandbox-controller-v$AGENT_SANDBOX_VERSION"
	go build -trimpath -ldflags "$ldflags" -o "$out.tmp" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
	mv "$out.tmp" "$out"
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
if $node; then
	[[ -x "$dir/agent-sandbox-controller-v$AGENT_SANDBOX_VERSION" ]] || build_agent_sandbox
	echo "k8s-binaries: agent-sandbox-controller v$AGENT_SANDBOX_VERSION ready after $((SECONDS - start))s" >&2
	build_node
fi
echo "$dir"
