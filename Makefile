# `make test` is the test command README gives and .ci/run runs. It needs
# root: the test-bed builds network namespaces and starts sshd.
GO ?= go

.PHONY: test deps check bench fuzz conformance speed-guard sailor
# deps installs the Debian packages the test-bed needs, then builds the
# Kubernetes test-bed's binaries into ~/.cache/pipette-launch/k8s when the
# cache lacks them (about 13 minutes cold on 2 cores; at once when warm), and
# sets up the real DeepSpeed and Megatron-LM kits of ../shared/frameworks
# (about 3 minutes cold; a second run only checks), which tests of the
# elastic restarts and of the memory model run; so that `make test` does all
# of its own set-up on a fresh machine, and those tests run there rather
# than finding no kit (make conformance used to be the first to set them up,
# after make test).
deps:
	./.ci/install-deps
	$(GO) run ./cmd/pipette-testbed build --kubernetes
	@test -d "$(PIPETTE_FRAMEWORKS)/deepspeed" -a -d "$(PIPETTE_FRAMEWORKS)/megatron" || { echo "deps: no framework kits at $(PIPETTE_FRAMEWORKS): set PIPETTE_FRAMEWORKS to the folder holding deepspeed/ and megatron/" >&2; exit 2; }
	PIPETTE_FRAMEWORKS="$(PIPETTE_FRAMEWORKS)" ./conformance/setup-kits.sh .

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting" >&2; exit 1; }
	$(GO) vet ./...

test: deps check
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz

# Native fuzz targets, each run for a number of executions, not a duration:
# with a duration `go test -fuzz` can fail with a bare "context deadline
# exceeded" when a starved worker misses the coordinator's stop (a race in
# Go before 1.27, golang/go#75804; CI went red on it at 4db3f27). Counts
# are sized to about 5-10 s each on an idle 2-core machine (rates differ
# 150x between targets); FUZZSCALE multiplies them all. A crash leaves its
# input under the package's testdata/fuzz/, which plain `go test` then runs
# as a regression test: commit it. The three script renderers' targets
# (FuzzHostScript, FuzzPodScripts, FuzzBatchScript) run each generated
# script with a real sh, a few dozen processes an execution (about 0.3 s of
# CPU for a host script, 0.05 s for a batch script), hence their small
# counts: about 20 s together.
FUZZSCALE ?= 1
FUZZ_TARGETS = ./internal/hostlist:FuzzExpand:300000 ./launcher/remote:FuzzParseHostfile:40000 \
	./planner/cluster:FuzzParseClusterFile:60000 ./planner/cluster:FuzzParseModelFile:100000 \
	./planner/cluster:FuzzModelFromMegatronArgs:200000 ./templates:FuzzPlannedDSConfig:100000 \
	./internal/shellquote:FuzzQuoteRoundTrip:6000 ./templates/job:FuzzHostScript:60 \
	./templates/k8s:FuzzPodScripts:40 ./cmd/internal/sbatch:FuzzBatchScript:600
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; n=$$(( $${rest##*:} * $(FUZZSCALE) )); \
		echo "fuzz $$fn in $$pkg for $$n executions"; start=$$(date +%s); \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime "$${n}x" -parallel 2 -timeout 10m $$pkg || exit 1; \
		echo "fuzz $$fn: $$(( $$(date +%s) - start )) s"; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./planner/...

# The real frameworks judge the corpus of public launch lines and real
# DeepSpeed jobs (docs/conformance.md). The kits come from
# PIPETTE_FRAMEWORKS (default: ../shared/frameworks beside the checkout);
# their env dirs from the kits' own PIPETTE_DEEPSPEED_ENV and
# PIPETTE_MEGATRON_ENV. Both set-ups run at once (a second run only checks).
PIPETTE_FRAMEWORKS ?= $(abspath ../shared/frameworks)
conformance:
	@test -d "$(PIPETTE_FRAMEWORKS)/deepspeed" -a -d "$(PIPETTE_FRAMEWORKS)/megatron" || { echo "conformance: no framework kits at $(PIPETTE_FRAMEWORKS): set PIPETTE_FRAMEWORKS to the folder holding deepspeed/ and megatron/" >&2; exit 2; }
	@start=$$(date +%s); \
	PIPETTE_FRAMEWORKS="$(PIPETTE_FRAMEWORKS)" ./conformance/setup-kits.sh . || exit 1; \
	echo "conformance: kits set up in $$(( $$(date +%s) - start )) s"; \
	$(GO) test -count=1 -run 'TestCorpusDryRun$$' -v ./cmd/internal/run/ > conformance-corpus.log 2>&1; crc=$$?; \
	grep -E '^corpus: |^(--- )?FAIL|corpus_test.go:[0-9]+: corpus line' conformance-corpus.log; [ $$crc = 0 ] || exit 1; \
	PIPETTE_CONFORMANCE=1 PIPETTE_FRAMEWORKS="$(PIPETTE_FRAMEWORKS)" $(GO) test -count=1 -timeout 20m -run 'TestConformance' -v ./conformance/ > conformance.log 2>&1; rc=$$?; \
	grep -E '^(megatron|deepspeed)|^(---|FAIL|ok|panic)|    --- |_test.go:[0-9]+: ' conformance.log | grep -vE '_test.go:[0-9]+: (expected failure|job .*: [0-9]+ s$$|.*: (DeepSpeed accepts|DeepSpeed refuses the user|DeepSpeed derives what the plan|Megatron OK|Megatron refuses the original))'; \
	echo "conformance: $$(( $$(date +%s) - start )) s in all (full log: conformance.log)"; exit $$rc

# Planning speed against the pinned reference commit (bench/guard/README.md).
speed-guard:
	GO=$(GO) ./bench/guard/run.sh

# Every throughput row of Sailor's artifact (Figures 7, 8b, 10), Sailor's
# planner, its baselines and our plans scored by Sailor's own simulator,
# from the archive in ../shared/frameworks (bench/sailor/README.md). Fails
# when our plan is slower than Sailor's on any row: informational, not in CI.
SAILOR_ARCHIVE ?= $(abspath ../shared/frameworks/src/sailor-cf2c8e3.tar.gz)
sailor:
	./bench/sailor/all.sh "$(SAILOR_ARCHIVE)"
