# cexec build. `make build` writes the daemon, the CLI (cexecctl, and cexecctl-bench for
# `cexecctl bench`) and one binary per plugin into bin/.
GO          ?= go
BIN         := bin
PLUGINS     := $(notdir $(wildcard plugins/*))
PROTOS      := $(shell find pluginapi/proto api -name '*.proto')
LDFLAGS     := -s -w -X github.com/cexec/cexec/internal/version.Version=$(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build run test check fmt-check tidy-check lint unit e2e fuzz bench proto proto-check eval-search clean

all: build

# Installs what a fresh Debian/Ubuntu machine lacks (apt and npm packages).
deps:
	@command -v $(GO) >/dev/null || { echo "Go >= 1.26.8 is required: https://go.dev/doc/install"; exit 1; }
	@scripts/deps.sh

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cexecd ./cmd/cexecd
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cexecctl ./cmd/cexecctl
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cexecctl-bench ./cmd/cexecctl-bench
	@for p in $(PLUGINS); do \
		echo "$(GO) build -o $(BIN)/cexec-plugin-$$p ./plugins/$$p"; \
		$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cexec-plugin-$$p ./plugins/$$p || exit 1; \
	done

# Runs the daemon in the foreground on the repository's default config.
run: deps build data
	$(BIN)/cexecd -config cexec.hcl

# The files the default cexec.hcl's filesystem server serves: a copy of
# examples/data made once (data/ is git-ignored, so the demo may change it).
data:
	cp -R examples/data data

# Everything CI runs (.ci/run calls exactly this). Tests need the binaries:
# end-to-end tests start cexecd and its plugins.
test: space deps build proto-check check k8s-binaries unit e2e fuzz

# Room on the disk for a test run; empties the Go build cache when there is
# too little (scripts/space.sh).
.PHONY: space
space:
	@GO=$(GO) scripts/space.sh

# Static checks: formatting, go.mod tidiness, vet, staticcheck, import rules.
check: fmt-check tidy-check lint

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change these files (run gofmt -w):"; echo "$$out"; exit 1; fi

tidy-check:
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod or go.sum: run it and commit"; $(GO) mod tidy -diff; exit 1; }

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) run ./internal/tools/importrules

# kube-apiserver and etcd for the sandbox-k8s envtest tests, built from the
# Go module proxy at the versions scripts/k8s-binaries.sh pins, into
# ~/.cache/cexec/k8s (a no-op when they are there; about 11 minutes cold).
.PHONY: k8s-binaries
k8s-binaries:
	@scripts/k8s-binaries.sh >/dev/null

# Opt-in, as root: the TestCluster* tests against a real one-node cluster
# (scripts/test-cluster.sh: kubelet, containerd, runc, agent-sandbox). A
# cluster it starts it takes down, also on failure (unless
# CEXEC_CLUSTER_KEEP=1); one that was already up stays up.
.PHONY: test-cluster
test-cluster: build
	@scripts/deps.sh --cluster
	@started=; scripts/test-cluster.sh env >/dev/null 2>&1 || started=1; \
	trap '[ -z "$$started" ] || [ -n "$$CEXEC_CLUSTER_KEEP" ] || scripts/test-cluster.sh down' EXIT; \
	scripts/test-cluster.sh up >/dev/null && eval "$$(scripts/test-cluster.sh env)" && \
	$(GO) test -race -count=1 -timeout 30m -run 'TestCluster' ./plugins/sandbox-k8s/... ./e2e/...

# bin/cexecd-image.tar: an OCI image archive of cexecd (Debian, python3,
# bubblewrap, bin/ in /opt/cexec/bin), built without Docker; needs root.
.PHONY: image
image: build
	@scripts/cexecd-image.sh

# Every package but the end-to-end suite in e2e/, with the race detector.
unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v '/e2e$$')

# The end-to-end suite: real binaries, a real cexecd, real MCP peers.
e2e: build
	$(GO) test -race -count=1 ./e2e/...

# A few seconds of each fuzz target (FUZZTIME=30s make fuzz for longer).
fuzz:
	scripts/fuzz.sh

bench: build data
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(BIN)/cexecctl bench tools --json
	$(GO) build -trimpath -o $(BIN)/catalogpeer ./internal/tools/catalogpeer
	$(BIN)/cexecctl bench tokens --json
	$(GO) run ./plugins/selector-embeddings/cmd/evalsearch -dataset ../shared/eval/livemcpbench -scale -json
	scripts/bench.sh

# Only executions through a real cexecd (warm, cold, throughput, idle
# sandbox RSS); flags go to cexecctl bench exec: make bench-exec ARGS="--n 100".
.PHONY: bench-exec
bench-exec: build data
	scripts/bench.sh $(ARGS)

# cexec against in-process code runtimes (Pyodide, node:vm, a plain
# AsyncFunction, @utcp/code-mode's isolated-vm), each over MCP, interleaved,
# with ratios, and what each adds to a tool call (installs test/bench-peers
# from npm the first time):
# make bench-peers N=1000.
.PHONY: bench-peers
bench-peers: build data
	scripts/bench-peers.sh

.PHONY: bench-replicas
# Executions per second with one cexecd and with two behind HAProxy (needs
# PostgreSQL and HAProxy from scripts/deps.sh).
bench-replicas:
	$(GO) test -count=1 -v -run '^TestReplicasBench$$' ./e2e/

# Soak and chaos: 100,000 executions across 20 tenants while every plugin, the
# upstream and cexecd are SIGKILLed (make soak ARGS="-n 20000 -json").
.PHONY: soak
soak:
	scripts/soak.sh $(ARGS)

# Generators are pinned as go.mod tool dependencies; protoc comes from Debian's protobuf-compiler.
proto:
	scripts/proto.sh

# Fails when the committed generated code differs from what `make proto` writes,
# a generated file is untracked, or a committed one is no longer generated.
proto-check:
	scripts/proto.sh --check

# Tool-search quality on every set in ../shared/eval: plain BM25 beside the configured selector.
eval-search:
	$(GO) run ./plugins/selector-embeddings/cmd/evalsearch -eval-dir ../shared/eval

# Installs the binaries, the plugins, the shared skills and workflows, an example config
# (never over an existing one) and the systemd unit:
#   make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]
# PLUGIN_BIN is where the plugin binaries were built (default BIN).
PREFIX      ?= /usr/local
SYSCONFDIR  ?= /etc
UNITDIR     ?= /lib/systemd/system
PLUGIN_BIN  ?= $(BIN)
BINDIR      := $(PREFIX)/bin
PLUGINDIR   := $(PREFIX)/lib/cexec/plugins
DATADIR     := $(PREFIX)/share/cexec
DOCDIR      := $(PREFIX)/share/doc/cexec
SUBST       := sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@PLUGINDIR@|$(PLUGINDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g' \
	-e 's|@DOCDIR@|$(DOCDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g'

.PHONY: install
install: build
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(PLUGINDIR) $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR)
	install -d -m 0700 $(DESTDIR)$(SYSCONFDIR)/cexec
	install -m 0755 $(BIN)/cexecd $(BIN)/cexecctl $(BIN)/cexecctl-bench $(DESTDIR)$(BINDIR)/
	install -m 0755 $(PLUGIN_BIN)/cexec-plugin-* $(DESTDIR)$(PLUGINDIR)/
	cp -R skills workflows $(DESTDIR)$(DATADIR)/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	$(SUBST) packaging/cexecd.service.in > $(DESTDIR)$(UNITDIR)/cexecd.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/cexec/cexec.hcl ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/cexec/cexec.hcl; the new example is cexec.hcl.dist"; \
		$(SUBST) packaging/cexec.hcl.in > $(DESTDIR)$(SYSCONFDIR)/cexec/cexec.hcl.dist; \
	else \
		$(SUBST) packaging/cexec.hcl.in > $(DESTDIR)$(SYSCONFDIR)/cexec/cexec.hcl; \
		chmod 0600 $(DESTDIR)$(SYSCONFDIR)/cexec/cexec.hcl; \
	fi
	@echo "installed; start with: systemctl daemon-reload && systemctl enable --now cexecd"

clean:
	rm -rf $(BIN)
