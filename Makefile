# make test: vet and race-test every module in the repository.
GO ?= go
# TEST_TIMEOUT bounds each package's tests. The race detector and the limiter's
# simulations take minutes on a loaded 2-core machine: more than go test's default 10m.
TEST_TIMEOUT ?= 30m
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)

.PHONY: test vet bench fuzz quickstart

test: vet
	@set -e; for m in $(MODULES); do echo "== go test -race $$m"; (cd $$m && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...); done

vet:
	@set -e; for m in $(MODULES); do echo "== go vet $$m"; (cd $$m && $(GO) vet ./...); done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

quickstart:
	$(GO) run ./examples/quickstart
