# make test: race-test every module in the repository, vetting what the tests compile.
#
# Each module is tested with `go test -race -vet=all`: go test runs every vet
# analyzer on each package it tests (test files included) inside the same race
# build, so nothing is compiled twice and no package is vetted that no test
# builds. The few packages the tests compile but that have no test files of
# their own (helpers such as internal/quotasim, the quickstart) are vetted with
# `go vet -race` beside them. Progress: one line per module, with the elapsed
# time, and go test's line per package as it finishes.
GO ?= go
# TEST_TIMEOUT bounds each package's tests: go test's default of 10m is too short
# for the race detector on a loaded 2-core machine.
TEST_TIMEOUT ?= 30m
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)

.PHONY: test vet bench quickstart

test:
	@set -e; start=$$(date +%s); n=0; total=$(words $(MODULES)); \
	for m in $(MODULES); do \
		n=$$((n+1)); \
		echo "== [$$n/$$total] $$m: go test -race -vet=all ($$(( $$(date +%s) - start ))s elapsed)"; \
		(cd $$m && \
		 untested=$$($(GO) list -f '{{if not (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' ./...) && \
		 if [ -n "$$untested" ]; then echo "   go vet -race (packages without tests):" $$untested; $(GO) vet -race $$untested; fi && \
		 $(GO) test -race -vet=all -count=1 -timeout $(TEST_TIMEOUT) ./...); \
	done; \
	echo "== make test: $$total modules passed in $$(( $$(date +%s) - start ))s"

# vet: only the vet half of make test (every analyzer, on what the tests compile).
vet:
	@set -e; for m in $(MODULES); do echo "== go vet $$m"; \
		(cd $$m && $(GO) vet -race ./...); done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

quickstart:
	$(GO) run ./examples/quickstart
