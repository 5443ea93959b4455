# Vigil — see README.md. `make run` and `make test` work on a fresh machine
# with Go and the PostgreSQL server binaries (.ci/run installs them).
GO      ?= go
BIN     := bin/vigil
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
PKGS    := ./...

.PHONY: all build run pro-demo test lint bench fuzz clean

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/vigil

# Lite with its private PostgreSQL, the example DAGs and 2 in-process agents;
# triggers the pipeline DAG, waits for it, and stops everything it started.
run: build
	BIN=$(BIN) deploy/demo/lite.sh

# Pro: embedded etcd + private PostgreSQL + 3 replicas + 2 agents; kills the
# leader mid-run and shows the takeover; stops everything it started.
pro-demo: build
	BIN=$(BIN) deploy/demo/pro.sh

# Integration tests start their own throwaway PostgreSQL (store/storetest).
test:
	$(GO) test -count=1 -timeout 15m $(PKGS)

lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Benchmarks print their figures; docs/performance.md records them.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./dag

clean:
	rm -rf bin
