#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build, run and test
# cexec: Debian packages (bubblewrap, protoc, mypy, node, e2fsprogs, postgresql, haproxy, prometheus) and the npm packages
# of the real MCP servers the tests talk to. Idempotent and quiet when
# everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
[ -x /usr/bin/mypy ] || missing+=(mypy)
[ -x /usr/bin/python3 ] || missing+=(python3)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v git >/dev/null 2>&1 || missing+=(git)
# The metrics e2e test scrapes cexecd with a real Prometheus (the test starts
# its own; on a machine with systemd the package also starts a service).
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# Per-tenant file system images (core/workspace/diskimage).
command -v mkfs.ext4 >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
# Replicas: tests start a real PostgreSQL (internal/testutil/pgtest) and put
# Debian's HAProxy in front of two cexecd (e2e/replicas_test.go).
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
# make test-cluster (scripts/deps.sh --cluster): a one-node Kubernetes cluster
# (scripts/test-cluster.sh) on containerd, runc and the CNI plugins, with
# images made by mmdebstrap.
if [ "${1:-}" = --cluster ]; then
	command -v containerd >/dev/null 2>&1 || missing+=(containerd)
	command -v runc >/dev/null 2>&1 || PATH="$PATH:/usr/sbin" command -v runc >/dev/null 2>&1 || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
	command -v openssl >/dev/null 2>&1 || missing+=(openssl)
	command -v curl >/dev/null 2>&1 || missing+=(curl)
	command -v jq >/dev/null 2>&1 || missing+=(jq)
	command -v ip >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v ip >/dev/null 2>&1 || missing+=(iproute2)
fi
if [ "${#missing[@]}" -gt 0 ]; then
	echo "deps: installing Debian packages: ${missing[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm peers: reinstall only when package.json changed since the last install.
peers=test/peers
stamp="$peers/node_modules/.cexec-installed"
if [ ! -f "$stamp" ] || [ "$peers/package.json" -nt "$stamp" ]; then
	echo "deps: installing npm test peers from $peers/package.json" >&2
	npm install --prefix "$peers" --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null
	touch "$stamp"
fi
