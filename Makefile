# make test: vet and race-test every module in the repository.
GO ?= go
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)

.PHONY: test vet bench fuzz quickstart

test: vet
	@set -e; for m in $(MODULES); do echo "== go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

vet:
	@set -e; for m in $(MODULES); do echo "== go vet $$m"; (cd $$m && $(GO) vet ./...); done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

quickstart:
	$(GO) run ./examples/quickstart
