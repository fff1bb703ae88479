# slicelet — build, test, lint, benchmark, demo.
#
# Go 1.26 from the machine; never download a toolchain.
export GOTOOLCHAIN := local
SHELL   := /bin/bash
GO      ?= go
BIN     := bin
PKGS    := ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/slicelet/slicelet/internal/buildinfo.Version=$(VERSION)
# grpcnotrace: grpc-go without its golang.org/x/net/trace support (an HTTP debug page slicelet
# does not serve), which links html/template and with it, through reflect's method lookups,
# every exported method of every linked type: cmd/slicelet 28.5 MB instead of 36.3 MB, and
# 4 MiB less of the binary resident (docs/benchmarks.md). hack/bench builds with the same tags.
# Add nocluster (TAGS='grpcnotrace nocluster') for a daemon without cluster mode ([cluster]):
# no client-go in it, 31.4 MB instead of 36.5 MB.
TAGS    ?= grpcnotrace
# Integration tests boot private systemd instances; keep the package parallelism modest on 2 cores.
TESTFLAGS ?= -p 2 -count=1 -timeout 20m

.PHONY: all build test test-deps test-unit lint bench demo clean fuzz chaos mixin-check architecture

all: build

# Without cgo, as the packages ship them: no libc and dynamic loader mapped into the daemon
# (2 MiB less of it resident, docs/benchmarks.md); os/user and the resolver are Go's own.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/slicelet ./cmd/slicelet
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/slicectl ./cmd/slicectl

# make test: every package; packages whose tests need systemd re-run themselves inside a
# throwaway systemd (internal/testharness/systemdtest) on the hybrid cgroup layout of this machine kind and,
# with SLICELET_VM=1, inside a throwaway cgroup v2 VM (internal/testharness/vmtest).
test: build device-plugin-build test-deps
	@mkdir -p build
	@set -o pipefail; rc=0; SLICELET_VM=1 $(GO) test $(TESTFLAGS) -v $(PKGS) 2>&1 | tee build/test.log || rc=$$?; \
	  if [ $$rc -ne 0 ]; then \
	    echo; echo "== make test failed (exit $$rc); the failures, from build/test.log:"; \
	    grep -n -B 15 -E -e '^--- FAIL|^panic:|^FAIL: |test timed out|build failed|\[setup failed\]' build/test.log | cut -c1-400 | head -150; \
	    grep -E '^FAIL' build/test.log; \
	    exit $$rc; \
	  fi

# The Debian packages the sandbox and the VM need, installed when missing (root only).
test-deps:
	@./hack/test-deps.sh

# make device-plugin-build: Kubernetes' sample device plugin (k8s.io/kubernetes/test/images/
# sample-device-plugin, from the module cache through hack/peer's module) for the device plugin
# integration test (internal/agent TestIntegrationDevicePlugin).
.PHONY: device-plugin-build
device-plugin-build:
	@mkdir -p build
	cd hack/peer && CGO_ENABLED=0 $(GO) build -trimpath -o ../../build/sample-device-plugin k8s.io/kubernetes/test/images/sample-device-plugin

# The same without the VM: fast local iteration.
test-unit:
	$(GO) test $(TESTFLAGS) $(PKGS)

# make fuzz: every fuzz target for a fixed number of executions each (untrusted input: manifest
# bounds, config documents, quantities, unit names, store records, $(VAR) expansion). Inputs that
# fail are written to the package's testdata/fuzz and then run by make test. The budgets are
# counts, about 6 s of fuzzing each on a quiet 2-core machine: Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" when a duration (-fuzztime 6s) ends while a worker
# is mid-call (go.dev/issue/75804, fixed in Go 1.27), and a loaded machine makes that likely; a
# count has no deadline. FUZZTIME=2m (a duration or NNx) overrides every budget for a longer run.
FUZZTIME ?=
FUZZ_TARGETS := \
	./internal/manifest:FuzzCheckBounds:20000 \
	./config:FuzzParse:3000 \
	./config:FuzzLocateKeys:5000 \
	./config:FuzzQuantityInRange:25000 \
	./units:FuzzEscape:2500 \
	./internal/pods/systemdrt:FuzzUnitName:4000 \
	./internal/pods/source:FuzzParseRecord:20000 \
	./internal/pods/lifecycle:FuzzExpandedLen:40000

fuzz:
	@set -eo pipefail; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest#*:}x; \
	  if [ -n "$(FUZZTIME)" ]; then budget=$(FUZZTIME); fi; \
	  echo "== fuzz $$name ($$pkg, $$budget)"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $$budget -parallel 2 2>&1 | grep -v '^fuzz: elapsed'; \
	done

# make chaos: SIGKILLs of slicelet at random points during churn of 100 pods, with record
# corruption and ephemeral-storage evictions, in the systemd sandbox (internal/agent TestChaos);
# reports evicted pods running again, leaked and duplicated
# units, lost API pods and wrongly destroyed pods (docs/reliability.md). Not part of make test.
CHAOS_KILLS ?= 100
chaos:
	SLICELET_CHAOS=1 SLICELET_CHAOS_KILLS=$(CHAOS_KILLS) $(GO) test ./internal/agent/ -run '^TestChaos$$' -count=1 -v -timeout 60m

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@# The daemon without cluster mode (make build TAGS='grpcnotrace nocluster') must build too.
	$(GO) vet -tags 'grpcnotrace nocluster' ./cmd/... ./internal/agent/...
	$(GO) tool staticcheck $(PKGS)
	@# hack/peer is a module of its own: the same checks there, with the product module's staticcheck.
	cd hack/peer && $(GO) vet ./...
	$(GO) build -o build/staticcheck honnef.co/go/tools/cmd/staticcheck
	cd hack/peer && ../../build/staticcheck ./...

# make architecture: docs/architecture.md's import table written from the code (the layering
# test, run by make test, fails while it is stale).
architecture:
	$(GO) test ./internal/layers -run '^TestArchitectureDoc$$' -count=1 -update

bench:
	$(GO) run ./hack/bench -go $(GO) -out docs/benchmarks.md

demo: build
	./hack/demo.sh

# make package: dist/slicelet_<version>-1_<arch>.deb and dist/slicelet-<version>-1.<arch>.rpm,
# built by nfpm (a go.mod tool: no download outside the module proxy) from packaging/nfpm.yaml.
# The binaries are make build's, without cgo (CGO_ENABLED=0: no libc beyond the dynamic
# loader), position-independent (ASLR; lintian and rpmlint expect PIE) and stripped, as
# distributions ship them. The version comes from git describe (packaging/version.sh); file times are the commit's
# (SOURCE_DATE_EPOCH), so the same commit gives the same packages.
PKG_VERSION = $(shell packaging/version.sh)
PKG_EPOCH   = $(shell git log -1 --format=%ct)
PKG_ARCH    = $(shell $(GO) env GOARCH)

package:
	CGO_ENABLED=0 GOFLAGS="$$($(GO) env GOFLAGS) -buildmode=pie" \
	  $(MAKE) --no-print-directory build LDFLAGS='$(LDFLAGS) -s -w'
	GO='$(GO)' SOURCE_DATE_EPOCH='$(PKG_EPOCH)' packaging/prepare.sh '$(PKG_VERSION)' build/package
	@mkdir -p dist
	rm -f dist/slicelet_*.deb dist/slicelet-*.rpm
	@# Debian control files have no License field (the licence is in .../doc/slicelet/copyright).
	sed '/^license:/d' packaging/nfpm.yaml >build/package/nfpm-deb.yaml
	for p in deb rpm; do \
	  config=build/package/nfpm-rpm.yaml; [ $$p = rpm ] || config=build/package/nfpm-deb.yaml; \
	  SLICELET_VERSION='$(PKG_VERSION)' GOARCH='$(PKG_ARCH)' SOURCE_DATE_EPOCH='$(PKG_EPOCH)' \
	    $(GO) tool nfpm package --config $$config --packager $$p --target dist/ || exit 1; \
	done
	@ls -l dist/

# make package-check: what a distribution runs on the packages: lintian and rpmlint (errors and
# warnings fail; overrides only with a reason), systemd-analyze verify and the unit's security
# exposure (<= 4.0), and config check of the packaged configuration (packaging/check.sh); then
# the install test (packaging/installtest, root): dpkg -i, start, a pod, journal, status, stop
# and purge of the .deb inside a throwaway systemd with an overlay root, nothing left after;
# and the upgrade test: pods running, the package upgraded to the next build and downgraded
# back, slicelet restarted each time and no pod (SLICELET_UPGRADE_FROM=<an earlier release's
# .deb> upgrades from that one; else dist's package rebuilt under the next revision).
package-check: package
	packaging/check.sh
	SLICELET_INSTALL_TEST=1 $(GO) test ./packaging/installtest/ -count=1 -timeout 30m -v

# make mixin-check: slicelet's monitoring mixin (packaging/mixin): promtool check rules and
# promtool test rules (the unit tests of each alert), and every metric its alerts and dashboard
# read is one slicelet serves. promtool is Debian's prometheus package's.
mixin-check:
	CI=true $(GO) test ./packaging/mixin/ -count=1 -v

clean:
	rm -rf $(BIN) build dist

# make oracle-diff [CORPUS=dir] [N=2000] [S=10000] [SEED="1 random"]: every manifest of CORPUS
# (testdata/corpus when it exists) and, for each seed, N pods of the resource generator and S of
# the structural generator through slicelet's decisions and the kubelet's own Go packages
# (hack/peer/oracle, its own module: the product never depends on k8s.io/kubernetes). "random"
# is a fresh seed each run; the seeds are printed, and SEED=<seed> replays one. One line per
# difference, then "oracle-diff: N pods, D differences"; exit 1 on any difference. A generated
# pod that differs is shrunk into testdata/corpus/regressions/. docs/oracle.md.
ORACLE ?= build/oracle
CORPUS ?= $(if $(wildcard testdata/corpus),testdata/corpus,)
N      ?= 2000
S      ?= 10000
SEED   ?= 1 random

.PHONY: oracle-build oracle-diff oracle-bench
oracle-build:
	cd hack/peer && $(GO) build -o ../../$(ORACLE) ./oracle

oracle-diff: oracle-build
	cd hack/peer && $(GO) test -count=1 ./podgen ./oracle
	$(ORACLE) -corpus '$(CORPUS)' -n $(N) -structural $(S) -seed '$(SEED)' -regressions testdata/corpus/regressions

# make oracle-bench: the corpus, 50 000 pods of each generator (seed 1); the figures go to
# docs/oracle.md.
oracle-bench: oracle-build
	$(ORACLE) -corpus '$(CORPUS)' -n 50000 -structural 50000 -seed 1 -bench docs/oracle.md >build/oracle-bench.log; \
	  rc=$$?; tail -n 1 build/oracle-bench.log; exit $$rc

# make peer-build: the real Kubernetes components slicelet is compared with (and kubectl), built from the Go
# module proxy by hack/peer (its own module; its go.mod lists them as tools): kubelet,
# kube-apiserver, kube-scheduler, kube-controller-manager (v1.37.2) and etcd (server v3.7.0),
# cached under build/peer/<version> (the first build downloads and compiles for minutes; a
# rebuild from the Go build cache takes seconds). docs/peer.md.
PEER_VERSION ?= v1.37.2
PEER_DIR     ?= build/peer/$(PEER_VERSION)
# The version the components report (kubelet --version, the API server's /version, nodeInfo), as
# Kubernetes' own build stamps it (hack/lib/version.sh): a go build leaves v0.0.0-master.
PEER_MAJOR   := $(patsubst v%,%,$(word 1,$(subst ., ,$(PEER_VERSION))))
PEER_MINOR   := $(word 2,$(subst ., ,$(PEER_VERSION)))
PEER_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(PEER_VERSION) -X $(p).gitMajor=$(PEER_MAJOR) -X $(p).gitMinor=$(PEER_MINOR) -X $(p).gitTreeState=clean)
PEER_TOOLS   := k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
	go.etcd.io/etcd/server/v3
.PHONY: peer-build
peer-build:
	@mkdir -p $(PEER_DIR)
	cd hack/peer && $(GO) build -trimpath -ldflags '$(PEER_LDFLAGS)' -o $(abspath $(PEER_DIR))/ $(PEER_TOOLS)
	@mv -f $(PEER_DIR)/server $(PEER_DIR)/etcd  # go build names it after the module path's last element
	@# The node conformance suite (make peer-conformance): e2e.test, the ginkgo CLI that runs it in
	@# parallel, and agnhost and nonewprivs, static (CGO off, as Kubernetes builds them) for the
	@# images built locally.
	cd hack/peer && $(GO) test -c -trimpath -ldflags '$(PEER_LDFLAGS)' -o $(abspath $(PEER_DIR))/e2e.test k8s.io/kubernetes/test/e2e
	cd hack/peer && $(GO) build -trimpath -o $(abspath $(PEER_DIR))/ github.com/onsi/ginkgo/v2/ginkgo
	cd hack/peer && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $(PEER_DIR))/ k8s.io/kubernetes/test/images/agnhost \
	  k8s.io/kubernetes/test/images/nonewprivs
	@ls $(PEER_DIR)

# make peer-diff [CORPUS=dir] [PEER_N=40] [PEER_SEED=1] [CGROUPS=v1,v2]: every Pod manifest of CORPUS
# (testdata/corpus by default, plus PEER_N pods of the seeded generator; with CORPUS given on
# the command line PEER_N defaults to 0) under the real kubelet (make peer-build) and under
# slicelet, one after the other on the same containerd, in a throwaway systemd sandbox (cgroup
# v1, this machine's hybrid layout) and in a throwaway VM (cgroup v2); images become a local
# busybox image, so any directory of Pod YAML runs offline. One line per cgroup difference
# (kubepods, QoS, pod, container), then "peer-diff: N manifests, D differences (v1), E
# differences (v2)"; exit 1 on any difference. docs/peer.md.
# PEER_SEED: peer-diff's generator seed, one number (oracle-diff's SEED may name several).
# SHARD=i/n: run only the i-th of n contiguous ranges of the batches, keeping the other shards'
# results in PEER_WORK; each shard's report compares every batch run so far, and
# `build/peerdiff -compare-only -work PEER_WORK -corpus ... -n ...` prints the combined one
# (the v2 VM on a busy 2-core machine takes hours for the real corpora: docs/peer.md).
PEER_SEED ?= 1
PEER_WORK ?= build/peer-diff
SHARD ?=
PEER_N  ?= $(if $(filter command line,$(origin CORPUS)),0,40)
CGROUPS ?= v1,v2
.PHONY: peer-diff peer-diff-check peerdiff-build
peerdiff-build:
	cd hack/peer && $(GO) build -o ../../build/peerdiff ./peerdiff

peer-diff: build peerdiff-build
	@[ -x $(PEER_DIR)/kubelet ] || { echo "peer-diff: $(PEER_DIR)/kubelet missing: make peer-build"; exit 2; }
	./build/peerdiff -corpus '$(CORPUS)' -n $(PEER_N) -seed $(PEER_SEED) -cgroups $(CGROUPS) -work '$(PEER_WORK)' -shard '$(SHARD)' -kubelet $(PEER_DIR)/kubelet -slicelet $(BIN)/slicelet

# make peer-diff-real [CGROUPS=v1] [SHARD=i/n] [PEER_WORK=dir]: peer-diff over the real corpora
# (Pod manifests and the pods of workloads from public repositories, REAL_CORPORA), no
# generated pods. docs/peer.md.
REAL_CORPORA ?= ../shared/pods-real,../shared/workloads
.PHONY: peer-diff-real
peer-diff-real:
	$(MAKE) peer-diff CORPUS='$(REAL_CORPORA)' CGROUPS='$(CGROUPS)'

# make workloads-explain [WORKLOADS=DIR]: every pod of the workload corpus explained offline, each
# on its own, as a cluster node with the cri runtime on a CNI network takes it (hack/workloads,
# slicectl explain pod): the pods some stage refuses, with why, and the counts. docs/cluster.md.
WORKLOADS ?= ../shared/workloads/pods
.PHONY: workloads-explain
workloads-explain: build
	$(GO) run ./hack/workloads -slicectl $(BIN)/slicectl $(WORKLOADS)

# make peer-diff-check: what CI runs when build/peer is not cached: peer-diff's own tests (corpus
# preparation, batching, comparison) and the prepared corpus through slicelet alone in the
# sandbox: every pod slicelet admits must come up with the local image (no pull, no crash).
peer-diff-check: build peerdiff-build
	cd hack/peer && $(GO) test -count=1 ./peerdiff ./peerrun ./podgen
	./build/peerdiff -corpus '$(CORPUS)' -n $(PEER_N) -seed $(PEER_SEED) -cgroups v1 -agents slicelet -slicelet $(BIN)/slicelet

# make peer-bench [REPS=5]: slicelet against the real kubelet on the same node in one run, the
# agents alternated, REPS rounds each (hack/peer/peerbench): manifest → Running (one pod, 30 at
# once), agent start → 110 pods Running, RSS and idle CPU with 110 pods, image GC over the same
# 10 unused images, eviction end to end with the kubelet registered to a local control plane,
# and cluster mode (the kubelet node and the slicelet node in turns on one control plane: API
# create → Running, start → Node Ready, RSS and idle CPU with 110 API pods).
# Writes the "## peer-bench" section of docs/peer.md and "## Benchmarks" of docs/cluster.md.
# Needs make peer-build (kubelet, etcd, kube-apiserver under $(PEER_DIR)). One scenario alone:
# build/peerbench -only imagegc -out '' (-only cluster -out '' writes docs/cluster.md only).
# ONLY=density [DENSITY_PODS=250]: the density rounds alone, not in the default run (both
# agents in cluster mode with DENSITY_PODS pause pods: agent start → all started, RSS, idle
# CPU, and pods created one at a time on the loaded node against the pod startup SLO);
# ONLY=density1000: slicelet alone at 1000 pods. Each writes "## Benchmarks at N pods" of
# docs/cluster.md; run it under the helpers' cluster lock on a shared machine.
REPS ?= 5
ONLY ?=
DENSITY_PODS ?= 250
.PHONY: peer-bench
peer-bench: build
	cd hack/peer && $(GO) build -o ../../build/peerbench ./peerbench
	build/peerbench -reps $(REPS) -kubelet $(PEER_DIR)/kubelet -bin $(PEER_DIR) -slicelet $(BIN)/slicelet -out docs/peer.md -cluster-out docs/cluster.md \
		$(if $(ONLY),-only $(ONLY) -density-pods $(DENSITY_PODS))

# make peer-controlplane: build/controlplane, the command that starts the local control plane
# (up|run|node|down; `build/controlplane -h`), for tests and demos outside the peer module.
.PHONY: peer-controlplane
peer-controlplane:
	cd hack/peer && $(GO) build -o ../../build/controlplane ./cmd/controlplane

# make peer-controlplane-test: the local control plane (hack/peer/controlplane: etcd,
# kube-apiserver with the Node authorizer and NodeRestriction, kube-scheduler,
# kube-controller-manager, on 127.0.0.1 inside the systemd sandbox) started from $(PEER_DIR);
# skips without the binaries, fails then with CI=true PEER_REQUIRED=1. docs/peer.md.
.PHONY: peer-controlplane-test
peer-controlplane-test:
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) $(GO) test -count=1 -v ./controlplane/

# make peer-tls-bootstrap-test: TestSliceletNodeTLSBootstrap (hack/peer/clustertest) alone: a
# slicelet node joining with only a bootstrap token kubeconfig (kubeadm's token Secret and RBAC),
# its client certificate signed by the controller manager for 3 minutes and rotated, its serving
# certificate approved and served, the certificate manager families on /metrics. Root; minutes.
.PHONY: peer-tls-bootstrap-test
peer-tls-bootstrap-test: build
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) SLICELET_BINARY=$(abspath $(BIN))/slicelet $(GO) test -count=1 -timeout 20m -v -run '^TestSliceletNodeTLSBootstrap$$' ./clustertest/

# make peer-cluster-test: cluster mode against that control plane (hack/peer/clustertest): a
# slicelet node (CRI on a private containerd, system:node credentials) registers and turns
# Ready, runs a pod the scheduler binds to it, deletes it gracefully, mirrors a manifest pod.
# Skips without the binaries, fails then with CI=true PEER_REQUIRED=1. TestNodeBehaviourSideBySide
# runs one scenario with the kubelet as the node, then with slicelet, and compares what the API
# showed (docs/cluster.md, "Side by side with a kubelet node"): minutes, hence the timeout.
.PHONY: peer-cluster-test
peer-cluster-test: build
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) SLICELET_BINARY=$(abspath $(BIN))/slicelet $(GO) test -count=1 -timeout 60m -v ./clustertest/

# make peer-swap-test [SLICELET_VM=1]: the kubelet replaced by slicelet on a live node and back
# (hack/peer/peerrun TestSwapKubeletSlicelet, docs/operations.md): container IDs, main PIDs,
# sandboxes and restart counts carried, on cgroup v1 (hybrid) and, with SLICELET_VM=1, v2; then
# the same on a node of a control plane (hack/peer/clustertest TestSwapUnderControlPlane: a
# Deployment, a DaemonSet and a static pod; the same pods, containers and mirror pod, and the
# Node and every pod Ready at every look), in the sandbox and, with SLICELET_VM=1, the VM.
.PHONY: peer-swap-test
peer-swap-test: build
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) SLICELET_BINARY=$(abspath $(BIN))/slicelet $(GO) test -count=1 -timeout 40m -v -run '^TestSwapKubeletSlicelet$$' ./peerrun/
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) SLICELET_BINARY=$(abspath $(BIN))/slicelet $(GO) test -count=1 -timeout 75m -v -run '^TestSwapUnderControlPlane$$' ./clustertest/

# make peer-metrics [SLICELET_VM=1]: the same pods under the kubelet and under slicelet (one control plane and
# containerd in a throwaway systemd sandbox, as peer-cluster-test), every metrics endpoint of the
# kubelet API scraped and the families compared (names, types, label names, buckets;
# hack/peer/peermetrics): the scrapes and report.md in build/peer-metrics, the report in
# docs/peer.md's "## peer-metrics"; fails on a difference without its reason. Root; minutes.
# SLICELET_VM=1: then again in the cgroup v2 VM (build/peer-metrics-v2, "## peer-metrics on cgroup v2").
# KUBE_PROMETHEUS: kube-prometheus' rendered manifests (the kubernetes-mixin's rules, its kubelet
# ServiceMonitor, its dashboards) that peer-metrics judges the differences by.
KUBE_PROMETHEUS ?= ../shared/monitoring/kube-prometheus
.PHONY: peer-metrics
peer-metrics: build
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) SLICELET_BINARY=$(abspath $(BIN))/slicelet \
	  PEER_METRICS_OUT=$(abspath build/peer-metrics) PEER_METRICS_DOCS=$(abspath docs/peer.md) \
	  PEER_METRICS_MIXIN=$(abspath $(KUBE_PROMETHEUS)) \
	  $(GO) test -count=1 -timeout 75m -run '^TestMetricsSideBySide$$' -v ./clustertest/

# make peer-addons-build: the add-ons a multi-node cluster runs as workloads, built from their Go
# modules into $(ADDONS_DIR): kube-proxy (k8s.io/kubernetes/cmd/kube-proxy $(PEER_VERSION), hack/peer's
# module), flanneld (github.com/flannel-io/flannel, hack/peer/addons' module; its udp backend
# needs cgo, so it links the C library its image holds), coredns (github.com/coredns/coredns,
# its own module) and metrics-server (sigs.k8s.io/metrics-server, its own module), the others
# static; their images are built from them when a cluster starts (hack/peer/cluster). Minutes
# the first time. peer-addons builds only those missing (what cluster-demo, cluster-test and
# peer-conformance SHARD=... need).
ADDONS_DIR            ?= build/addons
COREDNS_MODULE        := github.com/coredns/coredns@v1.14.7
METRICS_SERVER_MODULE := sigs.k8s.io/metrics-server/cmd/metrics-server@v0.8.0
ADDON_FILES           := $(addprefix $(ADDONS_DIR)/,kube-proxy flanneld coredns metrics-server)
.PHONY: peer-addons-build peer-addons
peer-addons-build:
	@$(MAKE) --no-print-directory -B $(ADDON_FILES)
	@ls $(ADDONS_DIR)

peer-addons: $(ADDON_FILES)

$(ADDONS_DIR)/kube-proxy:
	@mkdir -p $(ADDONS_DIR)
	cd hack/peer && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(PEER_LDFLAGS)' -o $(abspath $@) k8s.io/kubernetes/cmd/kube-proxy

$(ADDONS_DIR)/flanneld:
	@mkdir -p $(ADDONS_DIR)
	cd hack/peer/addons && CGO_ENABLED=1 $(GO) build -trimpath -o $(abspath $@) github.com/flannel-io/flannel

$(ADDONS_DIR)/coredns:
	@mkdir -p $(ADDONS_DIR)
	cd hack/peer && CGO_ENABLED=0 GOBIN=$(abspath $(ADDONS_DIR)) GOFLAGS=-mod=mod $(GO) install -trimpath $(COREDNS_MODULE)

$(ADDONS_DIR)/metrics-server:
	@mkdir -p $(ADDONS_DIR)
	cd hack/peer && CGO_ENABLED=0 GOBIN=$(abspath $(ADDONS_DIR)) GOFLAGS=-mod=mod $(GO) install -trimpath $(METRICS_SERVER_MODULE)

# make cluster-demo [NODES=slicelet,slicelet]: a Kubernetes cluster of several nodes on this
# machine (hack/peer/cluster): the control plane from $(PEER_DIR) in a throwaway systemd sandbox,
# each node (slicelet or the kubelet, one a NODES entry) in a sandbox of its own with its own
# containerd and network namespace on a bridge they share, kube-proxy, flannel, CoreDNS and
# metrics-server as workloads on the nodes (images built locally from $(ADDONS_DIR)); shows a
# Service reached by name from a pod on the other node, a StatefulSet's stable DNS names, a
# DaemonSet on every node, kubectl run -it, kubectl top and a StatefulSet on local PVs. Builds what is missing first (make peer-build, peer-addons-build: minutes). Root. The
# sandboxes and build/cluster-demo are removed at the end, on failure too. docs/cluster.md.
NODES ?= slicelet,slicelet
.PHONY: cluster-demo cluster-demo-node clusterdemo-build
clusterdemo-build: build
	@test -x $(PEER_DIR)/kube-apiserver -a -x $(PEER_DIR)/kube-scheduler -a -x $(PEER_DIR)/kube-controller-manager \
	  -a -x $(PEER_DIR)/etcd -a -x $(PEER_DIR)/kubectl -a -x $(PEER_DIR)/kubelet || $(MAKE) --no-print-directory peer-build
	cd hack/peer && $(GO) build -o $(abspath build)/clusterdemo ./cmd/clusterdemo

cluster-demo: clusterdemo-build peer-addons
	build/clusterdemo -bin $(abspath $(PEER_DIR)) -slicelet $(abspath $(BIN))/slicelet -addons $(abspath $(ADDONS_DIR)) \
	  -nodes $(NODES) -work $(abspath build/cluster-demo)

# make cluster-test [CLUSTER_NODES=kubelet,slicelet]: TestTwoNodesServiceByName (hack/peer/clustertest)
# on a cluster of two nodes as make cluster-demo builds it: each way, a pod on one node reaches
# by name a Service whose endpoint is on the other, then kubectl run -it and -i --rm on each
# node, kubectl top on every node and a StatefulSet on local PVs (one a node). The default
# mixed cluster has each agent as client, server and attach target; NODES of
# one kind: CLUSTER_NODES=slicelet,slicelet. About 5 minutes on 2 loaded cores, not part of make
# test (docs/cluster.md, "Several nodes"). Root.
CLUSTER_NODES ?= kubelet,slicelet
.PHONY: cluster-test
cluster-test: build peer-addons
	cd hack/peer && PEER_BIN_DIR=$(abspath $(PEER_DIR)) SLICELET_BINARY=$(abspath $(BIN))/slicelet PEER_ADDONS_DIR=$(abspath $(ADDONS_DIR)) \
	  PEER_CLUSTER_NODES=$(CLUSTER_NODES) $(GO) test -count=1 -timeout 30m -v -run '^TestTwoNodesServiceByName$$' ./clustertest/

# make cluster-demo-node: the one-node demo (hack/peer/clusterdemo): the control plane and a slicelet
# node on 127.0.0.1 inside one throwaway systemd sandbox; the node Ready, a Deployment in kubepods
# slices, a rolling update, kubectl logs, kubectl drain and an eviction under memory pressure.
cluster-demo-node: clusterdemo-build
	build/clusterdemo -single -bin $(abspath $(PEER_DIR)) -slicelet $(abspath $(BIN))/slicelet -work $(abspath build/cluster-demo)

# make peer-conformance [CONFORMANCE_PROCS=5]: the e2e suite's sig-node Conformance specs
# (e2e.test of make peer-build) against a kubelet node, then a slicelet node, on one local
# control plane and one private containerd with a CNI bridge, inside a throwaway systemd sandbox
# (hack/peer/conformance); images built locally, never pulled. Writes build/conformance/report.md
# (every spec) and the "## Node conformance" section of docs/cluster.md; the JUnit reports and
# logs stay in build/conformance/run/reports. Root; about 35 minutes on 2 loaded cores.
#
# make peer-conformance SHARD=sig-cli[,sig-scheduling...] [NODES=kubelet,kubelet] [CONFORMANCE_PROCS=2]
# [SHARD_TIMEOUT=100m]: those SIGs' [Conformance] specs, nothing skipped, on a multi-node cluster
# as make cluster-demo builds it (NODES: kubelet, slicelet, or mixed), the e2e images imported
# into every node; ginkgo runs in the control plane's namespace, bounded by SHARD_TIMEOUT, and
# the cluster is torn down at the end. The results (every spec) go to
# docs/conformance/<cluster>_<SIGs>.json, and docs/cluster.md's "## Conformance on several
# nodes" is rendered from all of them (make conformance-report does only that); ginkgo's output
# and the JUnit report stay in build/shard/reports (a short path: the nodes' unix sockets live
# under it). SPECS=<regexp> re-runs only the shard's specs whose text matches it (recorded as
# <cluster>_<SIGs>_rerun.json and listed apart; the shard's counts stay its whole runs').
# SPECS=<regexp> PART=i/n runs a part of a shard too long for one run: the newest run of each
# of the n parts (<cluster>_<SIGs>_part<i>of<n>.json), their SPECS disjoint, count together as
# the whole shard's. Root.
#
# make peer-conformance FOCUS=<regexp> [SKIP=<regexp>] FOCUS_NAME=<name> [NODES=...] [SPECS=<regexp>]:
# instead of a shard, the e2e specs FOCUS matches and SKIP does not (any, not [Conformance] by
# SIG) on the same multi-node cluster, recorded in docs/conformance/focus/<cluster>_<name>.json
# and rendered into docs/cluster.md's "## Chosen e2e specs on several nodes" (SPECS= a re-run of
# the run's specs it matches, <cluster>_<name>_rerun.json). The storage runs' FOCUS and SKIP
# are in docs/cluster.md, "Storage". Root.
CONFORMANCE_PROCS ?= $(if $(SHARD)$(FOCUS),2,5)
SHARD_TIMEOUT ?= 100m
# SHARD_PREFIX: the start of the sandboxes' names (conformance-<pid> when empty).
SHARD_PREFIX ?=
comma := ,
.PHONY: peer-conformance conformance-report conformance-runner
conformance-runner:
	cd hack/peer && $(GO) build -o $(abspath build)/conformance-runner ./cmd/conformance

# The aggregator spec's sample API server (test/images/sample-apiserver: k8s.io/sample-apiserver),
# static, for make peer-conformance SHARD=...
SAMPLE_APISERVER ?= build/e2e-images/sample-apiserver
$(SAMPLE_APISERVER):
	@mkdir -p $(dir $@)
	cd hack/peer && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) k8s.io/sample-apiserver

peer-conformance: build conformance-runner
	@test -x $(PEER_DIR)/e2e.test -a -x $(PEER_DIR)/ginkgo -a -x $(PEER_DIR)/agnhost -a -x $(PEER_DIR)/nonewprivs \
	  -a -x $(PEER_DIR)/kubelet \
	  || $(MAKE) --no-print-directory peer-build
ifeq ($(SHARD)$(FOCUS),)
	build/conformance-runner -bin $(abspath $(PEER_DIR)) -ginkgo $(abspath $(PEER_DIR))/ginkgo -agnhost $(abspath $(PEER_DIR))/agnhost \
	  -nonewprivs $(abspath $(PEER_DIR))/nonewprivs \
	  -slicelet $(abspath $(BIN))/slicelet -work $(abspath build/conformance/run) -procs $(CONFORMANCE_PROCS) \
	  -report build/conformance/report.md -docs docs/cluster.md
else
	@$(MAKE) --no-print-directory peer-addons $(SAMPLE_APISERVER)
	build/conformance-runner $(if $(FOCUS),-focus '$(FOCUS)' -focus-name '$(FOCUS_NAME)' $(if $(SKIP),-skip '$(SKIP)'),-shard $(SHARD)) -nodes $(NODES) -bin $(abspath $(PEER_DIR)) -agnhost $(abspath $(PEER_DIR))/agnhost \
	  -nonewprivs $(abspath $(PEER_DIR))/nonewprivs -slicelet $(abspath $(BIN))/slicelet -addons $(abspath $(ADDONS_DIR)) \
	  -sample-apiserver $(abspath $(SAMPLE_APISERVER)) -images-src "$$(cd hack/peer && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images" \
	  -work $(abspath build/shard) -procs $(CONFORMANCE_PROCS) -timeout $(SHARD_TIMEOUT) \
	  -commit "$$(git describe --always --dirty)" $(if $(SHARD_PREFIX),-prefix $(SHARD_PREFIX)) $(if $(SPECS),-specs '$(SPECS)') $(if $(PART),-part $(PART)) -results docs/conformance -docs docs/cluster.md
endif

conformance-report: conformance-runner
	build/conformance-runner -render-only -results docs/conformance -docs docs/cluster.md
