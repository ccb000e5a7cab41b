# make test: race-test every module in the repository, vetting what the tests compile.
# The work is in .ci/test: downloads in the background, the root module built once,
# then the modules in JOBS lanes (default 2; JOBS=1 runs them one after the other),
# with a progress line per module and a per-module summary at the end.
GO ?= go
# TEST_TIMEOUT bounds each package's tests: go test's default of 10m is too short
# for the race detector on a loaded 2-core machine.
TEST_TIMEOUT ?= 30m
JOBS ?= 2
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)

.PHONY: test vet bench quickstart

test:
	@GO=$(GO) JOBS=$(JOBS) TEST_TIMEOUT=$(TEST_TIMEOUT) ./.ci/test

# vet: only the vet half of make test (every analyzer, on what the tests compile).
vet:
	@set -e; for m in $(MODULES); do echo "== go vet $$m"; \
		(cd $$m && $(GO) vet -race ./...); done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

quickstart:
	$(GO) run ./examples/quickstart
