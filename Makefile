# `make test` is the test command README gives and .ci/run runs. It needs
# root: the test-bed builds network namespaces and starts sshd.
GO ?= go

.PHONY: test deps check bench
deps:
	./.ci/install-deps

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting" >&2; exit 1; }
	$(GO) vet ./...

test: deps check
	$(GO) test -count=1 -timeout 30m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./planner/
