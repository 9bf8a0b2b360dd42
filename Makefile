# `make test` is the test command README gives and .ci/run runs. It needs
# root: the test-bed builds network namespaces and starts sshd.
GO ?= go

.PHONY: test deps check bench fuzz
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
