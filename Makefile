# cexec build. `make build` writes the daemon, the CLI and one binary per plugin into bin/.
GO          ?= go
BIN         := bin
PLUGINS     := $(notdir $(wildcard plugins/*))
PROTOS      := $(shell find pluginapi/proto api -name '*.proto')
LDFLAGS     := -s -w -X github.com/cexec/cexec/core/version.Version=$(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build run test bench proto proto-check lint eval-search clean

all: build

# Installs what a fresh Debian/Ubuntu machine lacks (apt and npm packages).
deps:
	@command -v $(GO) >/dev/null || { echo "Go >= 1.25 is required: https://go.dev/doc/install"; exit 1; }
	@scripts/deps.sh

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cexecd ./cmd/cexecd
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cexecctl ./cmd/cexecctl
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

# Tests need the binaries (end-to-end tests start cexecd and its plugins).
test: deps build proto-check lint
	$(GO) test -race -count=1 ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(BIN)/cexecctl bench tools --json
	$(BIN)/cexecctl bench search --dataset ../shared/eval/livemcpbench --scale --json
	scripts/bench.sh

# Only executions through a real cexecd (warm, cold, throughput, idle
# sandbox RSS); flags go to cexecctl bench exec: make bench-exec ARGS="--n 100".
.PHONY: bench-exec
bench-exec: build
	scripts/bench.sh $(ARGS)

# Generators are pinned as go.mod tool dependencies; protoc comes from Debian's protobuf-compiler.
proto:
	protoc -I pluginapi/proto \
		--plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" \
		--plugin=protoc-gen-go-grpc="$$($(GO) tool -n protoc-gen-go-grpc)" \
		--go_out=paths=source_relative:pluginapi/proto --go-grpc_out=paths=source_relative:pluginapi/proto \
		$(shell find pluginapi/proto -name '*.proto' | sed 's|pluginapi/proto/||')
	protoc -I api \
		--plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" \
		--plugin=protoc-gen-go-grpc="$$($(GO) tool -n protoc-gen-go-grpc)" \
		--go_out=paths=source_relative:api --go-grpc_out=paths=source_relative:api \
		$(shell find api -name '*.proto' | sed 's|^api/||')

# Fails when the committed generated code differs from what `make proto` writes.
proto-check: proto
	@git diff --exit-code -- pluginapi/proto api || { echo "generated protobuf code is stale: run make proto and commit"; exit 1; }

# Tool-search quality on every set in ../shared/eval: plain BM25 beside the configured selector.
eval-search:
	$(GO) run ./core/searcheval/cmd/evalsearch -eval-dir ../shared/eval

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

clean:
	rm -rf $(BIN)
