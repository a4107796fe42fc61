# memcached-operator developer entry points. `make help` lists them.

SHELL := /usr/bin/env bash -o errexit -o pipefail -o nounset
GO ?= go
BIN := bin/memcached-operator
TOOLS_BIN := _output/tools/bin
STATICCHECK := $(TOOLS_BIN)/staticcheck
CRANE := $(TOOLS_BIN)/crane
IMAGE_BUILDER := $(TOOLS_BIN)/image

# The image. Its tag is the release the manifests install, read from
# artifacts/deploy/deployment.yaml, so that make image builds what they
# name; everything else it records comes from git, so one commit gives one
# image. Each may be set to override it; SOURCE_DATE_EPOCH is the
# reproducible-builds convention for the commit time.
IMAGE_REPO ?= ghcr.io/kubelite/memcached-operator
VERSION ?= $(shell sed -n 's|^ *image: ghcr.io/kubelite/memcached-operator:||p' artifacts/deploy/deployment.yaml)
REVISION ?= $(shell git rev-parse HEAD)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_DIR := _output/image
IMAGE_BIN = _output/bin/linux_$(IMAGE_ARCH)/memcached-operator
# The image builder and its test take the same flags: the test expects
# exactly what the builder was given.
IMAGE_META = -repository=$(IMAGE_REPO) -version=$(VERSION) -revision=$(REVISION) -created=$(SOURCE_DATE_EPOCH) -arch=$(IMAGE_ARCH)
MONITORINGCHECK := $(TOOLS_BIN)/monitoringcheck
HELM := $(TOOLS_BIN)/helm
CHART := charts/memcached-operator

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build a static bin/memcached-operator; make image builds the same for linux/IMAGE_ARCH.
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) .

# The checks need no cluster, and the suites mostly wait on theirs, so
# the two run side by side: the checks one after the other, the suites
# as soon as the control plane is built, which on a fresh machine takes
# minutes of compiling beside the checks.
.PHONY: test
test: ## Run verify, the unit tests, the fuzzer, the image and memcached tests, the integration suite and the fault suite. This is what CI runs.
	$(MAKE) --no-print-directory --jobs=2 --output-sync=target test-checks test-suites

.PHONY: test-checks
test-checks: verify test-unit test-fuzz test-image test-memcached test-karmada ## Run verify, the unit tests, the fuzzer, the image and memcached tests and the Karmada rules: everything make test runs but the suites.

# Each suite starts control planes of its own and spends most of its time
# waiting on them, so the two run side by side. --output-sync prints each
# suite's output whole, once it has finished.
.PHONY: test-suites
test-suites: cluster-binaries ## Run the integration and fault suites at the same time, each on its own control plane.
	$(MAKE) --no-print-directory --jobs=2 --output-sync=target test-integration test-faults

.PHONY: test-unit
test-unit: ## Run the unit tests with the race detector, and those of hack/tools/cmd/monitoringcheck and crdbounds.
	$(GO) test -race ./...
	cd hack/tools && $(GO) test ./cmd/monitoringcheck/ ./cmd/crdbounds/

# TestGoldenChildren, which make test-unit runs, fails on any change to the
# rendered children; this rewrites them on purpose. It refuses while a Pod
# template changed under a RenderingVersion already recorded.
.PHONY: update-golden
update-golden: ## Rewrite pkg/resources/testdata/golden from what the builders render; refuses a Pod template change without a RenderingVersion bump.
	$(GO) test -count=1 -run '^TestGoldenChildren$$' ./pkg/resources/ -args -update

.PHONY: verify-golden
verify-golden: ## Fail if pkg/resources/testdata/golden is not what the builders render, or its Pod templates changed without a RenderingVersion bump.
	$(GO) test -count=1 -run '^TestGoldenChildren$$' ./pkg/resources/

# The areas under test/integration each start a control plane of their own
# and build the operator binary with the race detector
# (test/integration/framework); their tests mostly wait on the cluster, so
# many run at once, within a package (-parallel) and across packages (-p).
# The root keeps the few tests that need the operator in-process, each
# file saying why. test/integration/helm installs the chart with the helm
# this builds.
INTEGRATION_PARALLEL ?= 8
INTEGRATION_PACKAGES ?= 3
FAULT_AREAS = ./test/integration/faults/ ./test/integration/apiserver/
# test/integration/crash syncs 400 Memcacheds unthrottled and takes both
# cores while it does: it runs after the other fault areas, whose restarts
# and floods it would starve.
CRASH_AREA = ./test/integration/crash/
INTEGRATION_AREAS = $(filter-out %/framework %/faults %/apiserver %/crash,$(shell $(GO) list -tags integration ./test/integration/...))
# The operator the areas run, built once for all of them with the race
# detector: each package building its own would compile and link it once
# per package, side by side (test/integration/framework, Binary).
RACE_BIN := _output/bin/race/memcached-operator
GO_TEST_INTEGRATION = MEMCACHED_OPERATOR_BINARY=$(abspath $(RACE_BIN)) $(GO) test -tags integration -count=1 -timeout 30m -p $(INTEGRATION_PACKAGES) -parallel $(INTEGRATION_PARALLEL)

# Always run: go build knows whether the binary is current. Written aside
# and moved into place, so that a test of another make starting it never
# finds it half-written.
.PHONY: $(RACE_BIN)
$(RACE_BIN):
	$(GO) build -race -o $@.new . && mv -f $@.new $@

.PHONY: test-integration
test-integration: cluster-binaries $(HELM) $(RACE_BIN) ## Run the integration tests against local control planes (builds them on first use): the areas under test/integration but the fault ones, and pkg/localcluster's.
	HELM=$(abspath $(HELM)) $(GO_TEST_INTEGRATION) $(INTEGRATION_AREAS)
	$(GO) test -race -tags integration -count=1 -timeout 30m ./pkg/localcluster/

# Without -race: the test starts no goroutines of its own, and the race
# detector makes hashing and unzipping the 50 MB binary take 30 s, not 4.
.PHONY: test-image
test-image: image ## Build the image, then check its config and files and run its binary taken out of the layer.
	cd hack/tools && $(GO) test -count=1 ./cmd/image/ -args -image-dir=$(abspath $(IMAGE_DIR)) $(IMAGE_META)

# The Pods' TLS and auth arguments, the auth wrapper and the reloaders,
# run against a real memcached: Debian's package, unpacked under _output/
# without root.
.PHONY: test-memcached
test-memcached: ## Run memcached with the TLS and auth flags the operator sets; renew its certificate and rotate its credentials the way the kubelet writes Secrets.
	MEMCACHED_BIN="$$(./hack/install-memcached.sh)" && \
		MEMCACHED_BIN="$$MEMCACHED_BIN" $(GO) test -tags memcached -count=1 -run '^TestMemcached' ./pkg/resources/

# The Lua rules of artifacts/karmada, run by Karmada's own interpreter,
# pinned by hack/karmada/go.mod, on the cases of artifacts/karmada/testdata.
# pkg/resources' TestKarmadaReplicaRequirements, which make test-unit runs,
# checks those cases against what the operator renders.
.PHONY: test-karmada
test-karmada: ## Run artifacts/karmada's Lua rules with Karmada's interpreter on artifacts/karmada/testdata.
	cd hack/karmada && $(GO) test -count=1 ./...

FUZZTIME ?= 30s

.PHONY: test-faults
test-faults: cluster-binaries $(RACE_BIN) ## Run the fault-injection suite: test/integration/faults and apiserver, then crash, then the root's in-process tests, which inject faults inside the process.
	$(GO_TEST_INTEGRATION) $(FAULT_AREAS)
	$(GO_TEST_INTEGRATION) $(CRASH_AREA)
	$(GO) test -race -tags integration -count=1 -timeout 30m .

.PHONY: test-fuzz
test-fuzz: ## Fuzz the builders for FUZZTIME.
	$(GO) test -run '^$$' -fuzz '^FuzzBuilders$$' -fuzztime $(FUZZTIME) ./pkg/resources/

FLAKE_RUNS ?= 5
FLAKE_TARGET ?= test-suites

# A test that fails only now and then mostly fails on a busy machine: a
# wait too short for it, a race it seldom loses. Each run takes as long as
# make test-suites (13 minutes on 2 cores) or longer, the load included;
# FLAKE_TARGET set to a quick target shows the loop itself.
.PHONY: test-flakes
test-flakes: ## Run the integration and fault suites (FLAKE_TARGET) FLAKE_RUNS times in a row while a busy loop takes one core; stop at the first failure. Output in _output/flakes/.
	FLAKE_RUNS='$(FLAKE_RUNS)' FLAKE_TARGET='$(FLAKE_TARGET)' MAKE='$(MAKE)' ./hack/test-flakes.sh

N ?= 100,1000
BENCH_FLAGS ?=

.PHONY: bench
bench: build cluster-binaries ## Measure at scale (N=100,1000 by default; e.g. make bench N=10000 BENCH_FLAGS=-profile) and run the Go microbenchmarks.
	$(GO) test -run '^$$' -bench . -benchmem -count 5 . ./pkg/resources/ ./pkg/drift/
	$(GO) build -o _output/bin/bench ./hack/bench
	_output/bin/bench -n $(N) $(BENCH_FLAGS)

$(IMAGE_BUILDER): hack/tools/go.mod hack/tools/go.sum $(filter-out %_test.go,$(wildcard hack/tools/cmd/image/*.go))
	cd hack/tools && $(GO) build -o ../../$@ ./cmd/image

.PHONY: print-version
print-version: ## Print the release the manifests install, which make image tags the image with.
	@echo $(VERSION)

.PHONY: image
image: $(IMAGE_BUILDER) ## Build the OCI image without Docker: _output/image/oci/ (OCI layout) and _output/image/memcached-operator.tar (docker load).
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -o $(IMAGE_BIN) .
	$(IMAGE_BUILDER) -binary=$(IMAGE_BIN) -out=$(IMAGE_DIR) $(IMAGE_META)

$(CRANE): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build -o ../../$@ github.com/google/go-containerregistry/cmd/crane

.PHONY: crane
crane: $(CRANE) ## Build crane, pinned by hack/tools/go.mod, to push the image (_output/tools/bin/crane).

.PHONY: run
run: build ## Run the operator: against KUBECONFIG if set, else against a fresh local control plane.
	./hack/run.sh

.PHONY: local-up
local-up: ## Start a local control plane and wait for Ctrl-C.
	./hack/local-up.sh

.PHONY: verify
verify: verify-fmt vet lint verify-codegen verify-binaries verify-monitoring verify-chart ## Run every check that does not run tests.

.PHONY: fmt
fmt: ## Format all Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt-clean.
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "Not gofmt-clean:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## Run go vet, on the operator, on the programs of hack/tools and on the tests of hack/helm and hack/karmada.
	$(GO) vet ./...
	$(GO) vet -tags integration,memcached ./...
	cd hack/tools && $(GO) vet ./cmd/...
	cd hack/helm && $(GO) vet ./...
	cd hack/karmada && $(GO) vet ./...

$(STATICCHECK): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(GO) build -o ../../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

.PHONY: lint
lint: $(STATICCHECK) ## Run staticcheck, pinned by hack/tools/go.mod, on the operator, on the programs of hack/tools and on the tests of hack/helm and hack/karmada.
	$(STATICCHECK) -tags integration,memcached $$($(GO) list -tags integration,memcached ./... | grep -v /pkg/generated/)
	cd hack/tools && ../../$(STATICCHECK) ./cmd/...
	cd hack/helm && ../../$(STATICCHECK) ./...
	cd hack/karmada && ../../$(STATICCHECK) ./...

$(MONITORINGCHECK): hack/tools/go.mod hack/tools/go.sum $(filter-out %_test.go,$(wildcard hack/tools/cmd/monitoringcheck/*.go))
	cd hack/tools && $(GO) build -o ../../$(MONITORINGCHECK) ./cmd/monitoringcheck

.PHONY: update-monitoring
update-monitoring: $(MONITORINGCHECK) ## Rewrite hack/monitoring/operator-metrics.txt from the operator metrics artifacts/monitoring uses.
	$(MONITORINGCHECK) -update

.PHONY: verify-monitoring
verify-monitoring: $(MONITORINGCHECK) ## Parse artifacts/monitoring's rules and dashboard with Prometheus's parsers; fail on a metric name nobody serves or a stale operator list.
	$(MONITORINGCHECK)

# Helm from source, at the version hack/helm/go.mod pins. -X gives it that
# version, as Helm's release builds do (else `helm version` says v4.3, and
# so does .Capabilities.HelmVersion); -s -w leave out the symbol tables,
# which makes the binary a third smaller and its link faster. A cold build
# takes about 3 minutes on 2 cores (docs/operations.md, "Installing with
# Helm"); go build is a no-op once it is current.
$(HELM): hack/helm/go.mod hack/helm/go.sum
	cd hack/helm && $(GO) build -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v4)" -o ../../$@ helm.sh/helm/v4/cmd/helm

.PHONY: helm
helm: $(HELM) ## Build helm, pinned by hack/helm/go.mod (_output/tools/bin/helm).

# The ci/*-values.yaml files are the namespaced forms. TestChartMatchesArtifacts
# (hack/helm) compares the renderings with kustomize builds of artifacts/
# and artifacts/namespaced.
.PHONY: verify-chart
verify-chart: $(HELM) ## Lint and render charts/memcached-operator, cluster-wide and namespaced; fail where it differs from artifacts/.
	$(HELM) lint --strict $(CHART)
	$(HELM) template memcached-operator $(CHART) --namespace memcached-operator >/dev/null
	for values in $(CHART)/ci/*-values.yaml; do \
		$(HELM) lint --strict $(CHART) --namespace memcached --values "$$values" && \
		$(HELM) template memcached-operator $(CHART) --namespace memcached --values "$$values" >/dev/null || exit 1; \
	done
	cd hack/helm && $(GO) test -count=1 ./...

.PHONY: update-codegen
update-codegen: ## Regenerate clients, deepcopy, register code and the CRD from types.go.
	./hack/update-codegen.sh

.PHONY: verify-codegen
verify-codegen: ## Fail if generated code or the CRD is out of date.
	./hack/verify-codegen.sh

.PHONY: verify-binaries
verify-binaries: ## Fail if git tracks an executable binary or a file over 1 MiB.
	./hack/verify-no-binaries.sh

.PHONY: cluster-binaries
cluster-binaries: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (cached).
	./hack/build-cluster.sh

.PHONY: clean
clean: ## Remove build output (keeps the cached control-plane binaries).
	rm -rf bin _output/tools _output/bin/bench _output/bin/localup _output/bench _output/image _output/bin/linux_* _output/bin/race
