# `make test` is the test command README gives and .ci/run runs. It needs
# root: the test-bed builds network namespaces and starts sshd.
GO ?= go

.PHONY: test deps check bench fuzz conformance speed-guard
deps:
	./.ci/install-deps

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting" >&2; exit 1; }
	$(GO) vet ./...

test: deps check
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz

# Native fuzz targets, each run for FUZZTIME (CI: 7 x 15 s = 105 s of
# fuzzing). A crash leaves its input under the package's testdata/fuzz/,
# which plain `go test` then runs as a regression test: commit it.
FUZZTIME ?= 15s
FUZZ_TARGETS = ./internal/hostlist:FuzzExpand ./launcher/remote:FuzzParseHostfile ./planner/cluster:FuzzParseClusterFile \
	./planner/cluster:FuzzParseModelFile ./planner/cluster:FuzzModelFromMegatronArgs ./templates:FuzzPlannedDSConfig \
	./internal/shellquote:FuzzQuoteRoundTrip
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$fn in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -parallel 2 $$pkg || exit 1; \
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
	grep -E '^(megatron|deepspeed)|^(---|FAIL|ok|panic)|    --- |_test.go:[0-9]+: ' conformance.log | grep -vE '_test.go:[0-9]+: (expected failure|job .*: [0-9]+ s$$|.*: (DeepSpeed accepts|DeepSpeed refuses the user|Megatron OK|Megatron refuses the original))'; \
	echo "conformance: $$(( $$(date +%s) - start )) s in all (full log: conformance.log)"; exit $$rc

# Planning speed against the pinned reference commit (bench/guard/README.md).
speed-guard:
	GO=$(GO) ./bench/guard/run.sh
