# utxo-cache: `make` or `make help` lists the targets.
#
# Settings (override on the command line: make fuzz FUZZTIME=2m):
GO           ?= go
BIN          ?= bin/utxo-cache
TEST_TIMEOUT ?= 30m
FUZZTIME     ?= 30s
RUN_ARGS     ?=
# make run's store. The demo keeps spent records long enough to show block
# 170's historic spend at tip 14131; the store records it, so serve needs no flag.
DATA_DIR     ?= ./data
DEMO_PRUNE_DEPTH ?= 20000

# The tests that skip under -race (allocation, heap and hit-ratio
# measurements, which the race detector's instrumentation makes
# meaningless) or run shortened under it (the node's model tests, a fifth of
# their steps), run whole without it by test-norace. internal/lint's
# TestNoRaceTestsListed keeps the list equal to the tests that check
# raceEnabled.
NORACE_PKGS  := ./api ./tiers/memory ./tiers/disk ./internal/workload ./node
NORACE_TESTS := TestAnswerBufferReused|TestDiskReadAllocs|TestFrontEndHitAllocs|TestCostModelTrap|TestEntryCostHoldsHeap|TestSlowChangeReadersHeap|TestBlockMemory|TestWindowMemoryEstimate|TestGeneratorMemoryBounded|TestWalletStateModel|TestPendingModel|TestLeaseModel

.DEFAULT_GOAL := help
.PHONY: help build build-loadtest test test-norace test-loadtest test-deploy bench fuzz lint verify run clean image

help: ## list the targets (the default)
	@echo "Targets:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-11s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo "Settings: GO=$(GO) BIN=$(BIN) TEST_TIMEOUT=$(TEST_TIMEOUT) FUZZTIME=$(FUZZTIME) RUN_ARGS=$(RUN_ARGS)"

build: ## build the binary (BIN, default bin/utxo-cache)
	$(GO) build -o $(BIN) ./cmd/utxo-cache

# After the race run, test-norace, test-loadtest and test-deploy run side by
# side: the last two mostly wait on the processes and containers they start
# (about 4 and 2 minutes alone), test-norace (about a minute) measures heaps
# and allocations, which other processes do not move, and runs the model
# tests whole, which wait on conditions, not on time; -O keeps each one's
# output together.
test: ## run every test with the race detector (tests that need redis-server use the one on PATH), then test-norace, test-loadtest and test-deploy side by side
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	@$(MAKE) --no-print-directory -j3 -O test-norace test-loadtest test-deploy

# loadtest/ is a Go module of its own (the load harness and its binary,
# utxo-loadtest), so that the service's binary, image and go.mod carry no
# load generator; it requires the service's module through a replace of ../.
LOADTEST_MODULE := loadtest
LOADTEST_BIN    ?= bin/utxo-loadtest

test-loadtest: ## run the load harness's tests (loadtest/): its units, and smoke runs that start real utxo-cache and redis-server processes
	cd $(LOADTEST_MODULE) && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

# deploy/ and deploy/kubernetes/ are Go modules of their own, so that their
# test dependencies (Prometheus's PromQL parser; kustomize and the Kubernetes
# schemas, whose Kubernetes libraries differ from the parser's) stay out of
# the service's module and out of each other's.
DEPLOY_MODULES := deploy deploy/kubernetes

test-deploy: ## run deploy/'s tests: the image, Prometheus rules and dashboard, compose stack, Kubernetes manifests (each skips when its tool is missing, with the install command)
	set -e; for m in $(DEPLOY_MODULES); do (cd $$m && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...); done

test-norace: ## run the tests that skip or shorten under -race (NORACE_TESTS) without it
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^($(NORACE_TESTS))$$' -v $(NORACE_PKGS)

bench: ## run every benchmark; note: the apply benchmark first builds a 1M-UTXO store (minutes, GBs of disk)
	$(GO) test -run='^$$' -bench=. -benchmem ./...

fuzz: ## run each Fuzz* target of every package for FUZZTIME (default 30s)
	@set -e; for pkg in $$($(GO) list ./...); do \
		list=$$($(GO) test -list '^Fuzz' $$pkg) || { echo "$$list"; exit 1; }; \
		for fn in $$(echo "$$list" | grep '^Fuzz'); do \
			echo "== $$pkg $$fn ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$${fn}\$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done

lint: ## go vet (every module), gofmt, and the import-confinement test (internal/lint)
	$(GO) vet ./...
	set -e; for m in $(LOADTEST_MODULE) $(DEPLOY_MODULES); do (cd $$m && $(GO) vet ./...); done
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*' -not -path './.git/*' -not -path '*/node_modules/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) test -count=1 ./internal/lint

verify: lint ## lint, then check that go mod tidy would change nothing and that everything builds
	$(GO) mod tidy -diff
	set -e; for m in $(LOADTEST_MODULE) $(DEPLOY_MODULES); do (cd $$m && $(GO) mod tidy -diff); done
	$(GO) build ./...
	cd $(LOADTEST_MODULE) && $(GO) build ./...

run: build ## serve DATA_DIR on 127.0.0.1:8080; an empty store is first loaded with real Bitcoin blocks 0..14131
	@if [ ! -e "$(DATA_DIR)" ]; then \
		echo "loading real mainnet blocks 0..14131 into $(DATA_DIR) (testdata/bitcoin; a few seconds)"; \
		$(BIN) import-bitcoin --data-dir "$(DATA_DIR)" --prune-depth $(DEMO_PRUNE_DEPTH) testdata/bitcoin/blk_0_to_14131.dat.bz2 || { rm -rf "$(DATA_DIR)"; exit 1; }; \
	fi
	$(BIN) serve --data-dir "$(DATA_DIR)" $(RUN_ARGS)

# make image: the OCI image (deploy/Containerfile), built with podman and no
# registry. VERSION and REVISION become its labels; IMAGE:VERSION its name.
IMAGE        ?= localhost/utxo-cache
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION     ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
PODMAN       ?= podman
IMAGE_CTX    := bin/image

image: ## build the OCI image IMAGE:VERSION with podman (static binary on scratch, non-root, no shell)
	@command -v $(PODMAN) >/dev/null || { echo "$(PODMAN) not found: apt-get install -y podman runc (deploy/README.md)"; exit 1; }
	rm -rf $(IMAGE_CTX)
	mkdir -p $(IMAGE_CTX)/rootfs/usr/local/bin $(IMAGE_CTX)/rootfs/etc/ssl/certs $(IMAGE_CTX)/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(IMAGE_CTX)/rootfs/usr/local/bin/utxo-cache ./cmd/utxo-cache
	printf 'utxo-cache:x:65532:65532:utxo-cache:/data:/sbin/nologin\n' >$(IMAGE_CTX)/rootfs/etc/passwd
	printf 'utxo-cache:x:65532:\n' >$(IMAGE_CTX)/rootfs/etc/group
	if [ -r /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt $(IMAGE_CTX)/rootfs/etc/ssl/certs/; fi
	$(PODMAN) build --pull=never --layers=false -f deploy/Containerfile \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
		-t $(IMAGE):$(VERSION) $(IMAGE_CTX)

clean: ## remove build output (bin/); never touches a store
	rm -rf bin

# loadtest is owned by the load harness (loadtest/): LOADTEST_BIN loads the
# service binary BIN; LOADTEST_ARGS go to `utxo-loadtest` (e.g.
# LOADTEST_ARGS='--scenario big', see its --help).
LOADTEST_ARGS ?=
LOADTEST_RUN   = $(LOADTEST_BIN) --bin $(abspath $(BIN))

build-loadtest: ## build the load harness (LOADTEST_BIN, default bin/utxo-loadtest; not part of the service or its image)
	cd $(LOADTEST_MODULE) && $(GO) build -o $(abspath $(LOADTEST_BIN)) ./cmd/utxo-loadtest

.PHONY: loadtest
loadtest: build build-loadtest ## standard load test (about 3.5 min): each tier and a read replica vs the bare ceiling, PASS/MISS, reports in results/
	$(LOADTEST_RUN) --cpu-profile $(LOADTEST_ARGS)

# soak: SOAK_DURATION (default 1h) of mixed reads, blocks, rollbacks and
# Redis restarts; fails when RSS, goroutines, open files or Pebble figures
# grow (docs/performance.md, "Soak").
SOAK_DURATION ?= 1h
.PHONY: soak
soak: build build-loadtest ## bounded soak (SOAK_DURATION, default 1h): resource growth, 0 mismatches, 0 5xx through Redis restarts
	$(LOADTEST_RUN) --scenario soak --duration $(SOAK_DURATION) $(LOADTEST_ARGS)

.PHONY: loadtest-replicas
loadtest-replicas: build build-loadtest ## writer apply throughput with 0 and 3 replicas tailing it, same run (a few minutes), PASS/MISS, reports in results/
	$(LOADTEST_RUN) --scenario replicas $(LOADTEST_ARGS)
