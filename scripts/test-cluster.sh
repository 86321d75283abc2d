#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine, for the sandbox-k8s
# TestCluster* tests (make test-cluster): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd (runc, CRI) with a CNI
# bridge, a kubelet, and the agent-sandbox controller with its extensions.
#
#   test-cluster.sh up    start it (idempotent: a running cluster is kept),
#                         print the environment the tests read
#   test-cluster.sh env   print that environment (export lines) for a running cluster
#   test-cluster.sh down  stop it and remove everything it made: processes,
#                         containers, mounts, network namespaces, the bridge,
#                         cgroups, files in fixed places (fixed_dirs) and its
#                         state directory
#
# Binaries: scripts/k8s-binaries.sh --node; images: scripts/sandbox-image.sh
# (both cached, see there). Needs root, containerd and runc (Debian's),
# the CNI plugins in /usr/lib/cni (containernetworking-plugins), mmdebstrap,
# openssl, curl and jq. Everything lives under $CEXEC_CLUSTER_DIR (default
# /tmp/cexec-cluster), logs in its logs/ directory; ports are
# $CEXEC_CLUSTER_PORT (default 16440) and the next 11.
set -euo pipefail

scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$scripts")
dir=${CEXEC_CLUSTER_DIR:-/tmp/cexec-cluster}
base=${CEXEC_CLUSTER_PORT:-16440}
namespace=cexec-sandboxes
node=cexec-node
bridge=cexec0
pod_subnet=10.88.77.0/24
service_range=10.96.0.0/16
cgroup_root=cexec-cluster
# Places the kubelet, containerd and the CNI library use whatever their
# configuration says; up notes which of them it made.
fixed_dirs=(/run/netns /run/containerd /var/lib/kubelet /var/log/containers /var/lib/cni)

apiserver_port=$((base + 3)) etcd_port=$((base + 4)) etcd_peer_port=$((base + 5))
kubelet_port=$((base + 6)) kubelet_healthz_port=$((base + 7))
scheduler_port=$((base + 8)) kcm_port=$((base + 9))
sandbox_metrics_port=$((base + 10)) sandbox_probe_port=$((base + 11))

log() { echo "test-cluster: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# api PATH [curl args...]: a request to the API server as the admin.
api() {
	curl -sS --fail-with-body --max-time 30 --cacert "$dir/pki/ca.crt" \
		--cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
		"https://127.0.0.1:$apiserver_port$1" "${@:2}"
}

# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
	local limit=$1 what=$2 deadline=$((SECONDS + $1))
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what not ready after ${limit}s (logs in $dir/logs)"
		sleep 0.2
	done
}

ctr_() { ctr --address "$dir/containerd/containerd.sock" --namespace k8s.io "$@"; }

# start NAME BINARY ARGS...: runs a component in its own session, logging to logs/NAME.log.
start() {
	local name=$1
	shift
	setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/pids/$name"
}

alive() { [[ -f "$dir/pids/$1" ]] && kill -0 "$(cat "$dir/pids/$1")" 2>/dev/null; }

images() { "$scripts/sandbox-image.sh" --names; }
pause_image() { images | sed -n '2s/ .*//p'; }

# print_env: the image is the one imported at up (the name changes with the image's inputs).
print_env() {
	cat <<-EOF
	export KUBECONFIG=$dir/admin.kubeconfig
	export CEXEC_TEST_KUBECONFIG=$dir/admin.kubeconfig
	export CEXEC_TEST_K8S_IMAGE=$(cat "$dir/image")
	export CEXEC_TEST_K8S_NAMESPACE=$namespace
	EOF
}

# issue NAME SUBJECT [SANS]: a client or server certificate signed by the cluster CA.
issue() {
	local name=$1 subj=$2 sans=${3:-}
	local ext="$dir/pki/$name.ext"
	if [[ -n "$sans" ]]; then
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" >"$ext"
	else
		printf 'extendedKeyUsage=clientAuth\n' >"$ext"
	fi
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$dir/pki/$name.key" -subj "$subj" -out "$dir/pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$dir/pki/$name.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
		-CAcreateserial -days 30 -extfile "$ext" -out "$dir/pki/$name.crt" 2>/dev/null
}

# kubeconfig NAME: NAME.kubeconfig with the client certificate pki/NAME.
kubeconfig() {
	cat >"$dir/$1.kubeconfig" <<-EOF
	apiVersion: v1
	kind: Config
	clusters:
	- name: cexec
	  cluster:
	    server: https://127.0.0.1:$apiserver_port
	    certificate-authority: $dir/pki/ca.crt
	users:
	- name: $1
	  user:
	    client-certificate: $dir/pki/$1.crt
	    client-key: $dir/pki/$1.key
	contexts:
	- name: cexec
	  context: {cluster: cexec, user: $1}
	current-context: cexec
	EOF
}

make_pki() {
	local ip=$1
	mkdir -p "$dir/pki"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
		-keyout "$dir/pki/ca.key" -subj /CN=cexec-test-cluster-ca -out "$dir/pki/ca.crt" 2>/dev/null
	issue apiserver /CN=kube-apiserver \
		"IP:127.0.0.1,IP:${service_range%.0/*}.1,IP:$ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
	issue admin "/O=system:masters/CN=cexec-admin"
	issue apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client"
	issue kubelet "/O=system:nodes/CN=system:node:$node"
	issue scheduler /CN=system:kube-scheduler
	issue controller-manager /CN=system:kube-controller-manager
	openssl genrsa -out "$dir/pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null
	local k
	for k in admin kubelet scheduler controller-manager; do kubeconfig "$k"; done
}

# The machine's address the node registers with (the API server reaches the kubelet there).
node_ip() { ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1; }

# CAP_SYS_RESOURCE (bit 24) missing: containerd may not lower oom_score_adj.
need_restrict_oom() {
	local eff
	eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
	(((16#$eff >> 24 & 1) == 0))
}

cgroup_v1() { [[ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]]; }

# cgroup_dirs: every hierarchy's directory of the cgroup root the kubelet uses.
cgroup_dirs() {
	local m
	for m in /sys/fs/cgroup /sys/fs/cgroup/*; do
		[[ -f "$m/cgroup.procs" ]] && echo "$m/$cgroup_root"
	done
	return 0
}

write_configs() {
	local ip=$1 restrict=false
	need_restrict_oom && restrict=true
	mkdir -p "$dir/containerd" "$dir/cni/net.d"
	cat >"$dir/containerd/config.toml" <<-EOF
	version = 2
	root = "$dir/containerd/root"
	state = "$dir/containerd/state"
	[grpc]
	  address = "$dir/containerd/containerd.sock"
	[plugins."io.containerd.internal.v1.opt"]
	  path = "$dir/containerd/opt"
	[plugins."io.containerd.grpc.v1.cri"]
	  sandbox_image = "$(pause_image)"
	  restrict_oom_score_adj = $restrict
	  [plugins."io.containerd.grpc.v1.cri".containerd]
	    snapshotter = "overlayfs"
	    default_runtime_name = "runc"
	    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
	      runtime_type = "io.containerd.runc.v2"
	      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
	        SystemdCgroup = false
	        Root = "$dir/containerd/runc"
	  [plugins."io.containerd.grpc.v1.cri".cni]
	    bin_dir = "/usr/lib/cni"
	    conf_dir = "$dir/cni/net.d"
	EOF
	# No gateway on the bridge: the host does not route for pods (and
	# net.ipv4.ip_forward stays as it is); programs reach nothing but their
	# pod, and exec goes through the kubelet.
	cat >"$dir/cni/net.d/10-cexec.conflist" <<-EOF
	{"cniVersion": "1.0.0", "name": "cexec-cluster", "plugins": [
	  {"type": "bridge", "bridge": "$bridge", "isGateway": false, "ipMasq": false,
	   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_subnet"}]], "dataDir": "$dir/cni/ipam"}}]}
	EOF
	local v1=false
	cgroup_v1 && v1=true
	cat >"$dir/kubelet.yaml" <<-EOF
	apiVersion: kubelet.config.k8s.io/v1beta1
	kind: KubeletConfiguration
	address: $ip
	port: $kubelet_port
	readOnlyPort: 0
	healthzBindAddress: 127.0.0.1
	healthzPort: $kubelet_healthz_port
	authentication:
	  anonymous: {enabled: false}
	  webhook: {enabled: false}
	  x509: {clientCAFile: $dir/pki/ca.crt}
	authorization: {mode: AlwaysAllow}
	containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
	cgroupDriver: cgroupfs
	cgroupRoot: /$cgroup_root
	failCgroupV1: $( $v1 && echo false || echo true)
	failSwapOn: false
	makeIPTablesUtilChains: false
	podLogsDir: $dir/pod-logs
	clusterDomain: cluster.local
	resolvConf: /etc/resolv.conf
	serializeImagePulls: false
	rotateCertificates: false
	evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
	imageGCHighThresholdPercent: 100
	EOF
}

install_crds() {
	local f
	for f in "$repo"/plugins/sandbox-k8s/internal/k8s/testdata/crds/*.yaml; do
		# The controller runs without its conversion webhook (it would need a
		# Service the API server can reach, so kube-proxy): the CRDs keep
		# their versions but convert with strategy None. Clients use v1beta1,
		# the storage version.
		awk '/^  conversion:$/ {print; print "    strategy: None"; skip=1; next}
		     skip && /^    / {next} {skip=0; print}' "$f" >"$dir/crds/${f##*/}"
		api /apis/apiextensions.k8s.io/v1/customresourcedefinitions -X POST \
			-H 'Content-Type: application/yaml' --data-binary @"$dir/crds/${f##*/}" >/dev/null
	done
	for f in sandboxes.agents.x-k8s.io sandboxclaims.extensions.agents.x-k8s.io \
		sandboxtemplates.extensions.agents.x-k8s.io sandboxwarmpools.extensions.agents.x-k8s.io; do
		wait_for 30 "CRD $f" crd_established "$f"
	done
}

crd_established() {
	api "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1" |
		jq -e '.status.conditions[] | select(.type == "Established" and .status == "True")'
}

# node_ready: Ready, and the not-ready taint the API server gives a new node
# lifted (by the node lifecycle controller), so pods schedule.
node_ready() {
	api "/api/v1/nodes/$node" | jq -e '(.status.conditions[] | select(.type == "Ready") | .status == "True")
		and ([.spec.taints[]? | select(.key == "node.kubernetes.io/not-ready")] | length == 0)'
}

cluster_running() {
	local c
	for c in etcd kube-apiserver containerd kubelet kube-controller-manager kube-scheduler agent-sandbox; do
		alive "$c" || return 1
	done
	[[ -f "$dir/up" ]] && node_ready >/dev/null
}

up() {
	[[ $EUID -eq 0 ]] || die "needs root (containerd, kubelet, mounts, network namespaces)"
	local t
	for t in containerd runc ctr openssl curl jq mmdebstrap ip; do
		command -v "$t" >/dev/null || die "$t is not installed"
	done
	[[ -x /usr/lib/cni/bridge ]] || die "/usr/lib/cni/bridge missing (apt-get install containernetworking-plugins)"
	if [[ -d "$dir" ]]; then
		if cluster_running; then
			log "already up"
			print_env
			return
		fi
		log "a stopped or broken cluster is in $dir: taking it down first"
		down
	fi
	local bins
	bins=$(nice "$scripts/k8s-binaries.sh" --node | tail -1)
	local sandbox_tar pause_tar
	sandbox_tar=$(nice "$scripts/sandbox-image.sh" | sed -n '1s/.* //p')
	pause_tar=$(images | sed -n '2s/.* //p')

	local t0=$SECONDS ip
	ip=$(node_ip)
	[[ -n "$ip" ]] || die "no address to register the node with (no default route)"
	mkdir -p "$dir"/{logs,pids,crds,etcd,kubelet,pod-logs}
	local d
	for d in "${fixed_dirs[@]}"; do
		[[ -d "$d" ]] || echo "$d" >>"$dir/made-dirs"
	done
	make_pki "$ip"
	write_configs "$ip"
	for d in $(cgroup_dirs); do mkdir -p "$d"; done

	start etcd "$bins/etcd" --name cexec --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "cexec=http://127.0.0.1:$etcd_peer_port" --unsafe-no-fsync
	start containerd containerd --config "$dir/containerd/config.toml"
	start kube-apiserver "$bins/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --advertise-address "$ip" --secure-port "$apiserver_port" \
		--tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
		--client-ca-file "$dir/pki/ca.crt" --authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
		--service-cluster-ip-range "$service_range" \
		--kubelet-client-certificate "$dir/pki/apiserver-kubelet.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet.key" \
		--kubelet-preferred-address-types InternalIP
	wait_for 60 containerd ctr_ version
	ctr_ images import "$pause_tar" >/dev/null
	ctr_ images import "$sandbox_tar" >/dev/null
	images | sed -n '1s/ .*//p' >"$dir/image"
	wait_for 120 kube-apiserver api /readyz
	log "API server ready after $((SECONDS - t0))s"
	# Before the controller manager: its garbage collector maps the kinds it
	# watches at start and would otherwise leave Sandboxes alone until its
	# next discovery sync (30 s).
	install_crds

	start kube-controller-manager "$bins/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port "$kcm_port" \
		--root-ca-file "$dir/pki/ca.crt" --use-service-account-credentials \
		--controllers garbagecollector,namespace,serviceaccount,root-ca-cert-publisher,nodelifecycle,podgc,replicaset,deployment,job,persistentvolume-binder,pvc-protection,pv-protection
	start kube-scheduler "$bins/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port "$scheduler_port"
	start kubelet "$bins/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
		--root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --hostname-override "$node" --node-ip "$ip"
	KUBECONFIG="$dir/admin.kubeconfig" start agent-sandbox "$bins/agent-sandbox-controller-v0.5.6" \
		--extensions --enable-webhook=false --leader-elect=false \
		--metrics-bind-address "127.0.0.1:$sandbox_metrics_port" --health-probe-bind-address "127.0.0.1:$sandbox_probe_port"
	api /api/v1/namespaces -X POST -H 'Content-Type: application/json' \
		--data "{\"metadata\":{\"name\":\"$namespace\"}}" >/dev/null
	wait_for 120 "node $node" node_ready
	log "node Ready after $((SECONDS - t0))s"
	wait_for 60 "the default ServiceAccount of $namespace" api "/api/v1/namespaces/$namespace/serviceaccounts/default"
	wait_for 60 "the root CA ConfigMap of $namespace" api "/api/v1/namespaces/$namespace/configmaps/kube-root-ca.crt"
	wait_for 60 agent-sandbox curl -sf "http://127.0.0.1:$sandbox_probe_port/readyz"
	touch "$dir/up"
	log "cluster up after $((SECONDS - t0))s (not counting the builds)"
	print_env
}

# stop NAME: SIGTERM, then SIGKILL after 10 s.
stop() {
	[[ -f "$dir/pids/$1" ]] || return 0
	local pid i
	pid=$(cat "$dir/pids/$1")
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$dir/pids/$1"
}

# remove_pods: kills every container of this containerd and removes the pods'
# network namespaces (their veths go with them).
remove_pods() {
	alive containerd || return 0
	local id netns=()
	for id in $(ctr_ containers ls -q 2>/dev/null); do
		local ns
		ns=$(ctr_ containers info "$id" 2>/dev/null |
			jq -r '.Spec.linux.namespaces[]? | select(.type == "network") | .path // empty')
		[[ -n "$ns" ]] && netns+=("$ns")
		ctr_ tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $(ctr_ containers ls -q 2>/dev/null); do
		ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
		ctr_ containers delete "$id" >/dev/null 2>&1 || true
		# libcni's cache of the pod's networks (bridge and loopback).
		rm -f /var/lib/cni/results/*-"$id"-*
	done
	for ns in "${netns[@]}"; do
		[[ "$ns" == /var/run/netns/* || "$ns" == /run/netns/* ]] || continue
		umount "$ns" 2>/dev/null || true
		rm -f "$ns"
	done
}

# remove_netns: the network namespaces of pods still on the bridge (the
# containerd that made them may be gone), and libcni's cache of every pod
# network of this cluster.
remove_netns() {
	local ns f id
	for ns in $(ip -o link show master "$bridge" 2>/dev/null | sed -n 's/.* link-netns \([^ ]*\).*/\1/p'); do
		ip netns delete "$ns" 2>/dev/null || true
	done
	for f in /var/lib/cni/results/cexec-cluster-*; do
		[[ -e "$f" ]] || continue
		id=${f#*/cexec-cluster-}
		id=${id%-*}
		rm -f "$f" /var/lib/cni/results/*-"$id"-*
	done
}

# remove_fixed: removes what this cluster left in fixed_dirs, and the
# directories themselves where up made them.
remove_fixed() {
	local l
	for l in /var/log/containers/*.log; do
		[[ -L "$l" && "$(readlink "$l")" == "$dir"/* ]] && rm -f "$l"
	done
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	[[ -f "$dir/made-dirs" ]] || return 0
	local d
	while read -r d; do
		[[ -d "$d" ]] || continue
		# Sockets of shims that were killed; no other containerd uses a
		# directory this cluster made, unless one started since.
		if [[ "$d" == /run/containerd ]] && ! pgrep -x containerd >/dev/null; then
			rm -rf /run/containerd/s
		fi
		find "$d" -depth -type d -empty -delete 2>/dev/null || true
		[[ -d "$d" ]] && log "$d is not empty: left in place"
	done <"$dir/made-dirs"
	return 0
}

down() {
	[[ -d "$dir" ]] || return 0
	local c
	for c in agent-sandbox kube-scheduler kube-controller-manager kubelet; do stop "$c"; done
	remove_pods
	stop containerd
	# Shims outlive containerd; theirs name its socket.
	local pid
	for pid in $(pgrep -f -- "-address $dir/containerd/containerd.sock" || true); do
		kill -9 "$pid" 2>/dev/null || true
	done
	for c in kube-apiserver etcd; do stop "$c"; done
	# Deepest first: kubelet volumes, containerd's overlay and shm mounts.
	awk -v d="$dir" 'index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	remove_netns
	ip link del "$bridge" 2>/dev/null || true
	# Whatever still runs in the kubelet's cgroups (containerd gone early) is ours.
	for c in $(cgroup_dirs); do
		[[ -d "$c" ]] || continue
		find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null |
			while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done
	done
	# Killed processes leave their cgroups once reaped: retry for 5 s.
	local i
	for c in $(cgroup_dirs); do
		for ((i = 0; i < 25; i++)); do
			[[ -d "$c" ]] || break
			find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || sleep 0.2
		done
		[[ -d "$c" ]] && log "could not remove $c"
	done
	remove_fixed
	rm -rf "$dir"
	log "down"
}

case "${1:-}" in
up) up ;;
down) down ;;
env) [[ -f "$dir/up" ]] || die "no cluster in $dir (run: $0 up)"; print_env ;;
*) die "usage: $0 up|down|env" ;;
esac
