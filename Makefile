# Vigil — see README.md. `make run` and `make test` work on a fresh machine
# with Go: each first runs scripts/deps.sh, the one place that installs
# (as root, with apt-get) what it needs and is missing, or stops at once
# naming the packages.
GO      ?= go
BIN     := bin/vigil
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
PKGS    := ./...

.PHONY: all deps-run deps-test web build run pro-demo test lint bench bench-go fuzz chaos mutants mutation clean

all: build

# What `make run` and `make test` need beyond Go (scripts/deps.sh says
# what it installs and why; on a ready machine it prints nothing).
deps-run:
	@scripts/deps.sh run
deps-test:
	@scripts/deps.sh test

# The web console's npm libraries (adr/0020): npm ci, then copied into
# web/console/ui/vendor, which the binary embeds. Without this step the
# console works and shows a run's tasks as a list instead of a graph.
web:
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

# vigil and, beside it, vigil-supervise: the small program each task runs
# under (adr/0026-small-supervisor-program.md). Ship both together; vigil
# alone still works, at about three times the CPU per task start.
build: web
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(dir $(BIN)) ./cmd/vigil ./cmd/vigil-supervise

# Lite with its private PostgreSQL, the example DAGs and 2 in-process agents;
# triggers the pipeline DAG, waits for it, and stops everything it started.
run: deps-run build
	BIN=$(BIN) deploy/demo/lite.sh

# Pro: embedded etcd + private PostgreSQL + 3 replicas + 2 agents; kills the
# leader mid-run and shows the takeover; stops everything it started.
pro-demo: build
	BIN=$(BIN) deploy/demo/pro.sh

# Integration tests start their own throwaway PostgreSQL (store/storetest).
# The short chaos run (./chaos, docs/reliability.md) runs alongside the
# other packages with -v, so that its seeds and report are printed.
test: deps-test web
	@log=$$(mktemp); \
	$(GO) test -count=1 -timeout 10m -v ./chaos/ >"$$log" 2>&1 & chaos=$$!; \
	$(GO) test -count=1 -timeout 15m $$($(GO) list $(PKGS) | grep -v '/chaos$$'); rc=$$?; \
	wait $$chaos; crc=$$?; grep -v '^=== ' "$$log"; rm -f "$$log"; \
	[ $$rc -eq 0 ] && [ $$crc -eq 0 ]

# The chaos suite (docs/reliability.md) against bin/vigil: CHAOS_SEED,
# CHAOS_FAULTS and CHAOS_DURATION configure it; the report goes to
# CHAOS_REPORT (default: in its work directory). Exit 1 on any violation.
# Its skewed agents run bin/testhooks/vigil, built with the test hooks
# (internal/testhook), which no shipped build has.
chaos: build
	$(GO) build -tags vigil_testhooks -o bin/testhooks/ ./cmd/vigil ./cmd/vigil-supervise
	$(GO) run ./chaos/cmd/chaos

# The same with PostgreSQL as a primary and a synchronous standby under
# Debian's patroni (apt-get install patroni), failed over by kill -9 of
# the primary in place of the restart faults (docs/reliability.md,
# "Patroni"). Not part of make test.
chaos-patroni: build
	$(GO) build -tags vigil_testhooks -o bin/testhooks/ ./cmd/vigil ./cmd/vigil-supervise
	CHAOS_PATRONI=1 $(GO) run ./chaos/cmd/chaos

# Mutants of the code that decides harm (scripts/mutants.sh): each is
# built behind a build tag no shipped build sets, and the part of the
# suite that must catch it runs; exit 1 if any survives. MUTANTS=<tag
# part> runs only the matching ones.
mutants: deps-test web
	scripts/mutants.sh

# A mutation-testing run (gremlins, adr/0033) over reaper/, leader/ and
# the store's decision files, printing efficacy and mutant coverage per
# target; exit 1 below 90 % (docs/reliability.md, "Mutation score").
# Hours on 2 cores: not part of make test. MUTATION_DRY_RUN=1 only counts.
mutation: deps-test
	scripts/mutation.sh

lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The benchmark program (bench/): the real vigil binary over HTTP on a
# private durable PostgreSQL seeded with 1M terminal TIs, and River on the
# same server in the same run; one line per figure, then the Vigil/River
# ratios. About 10 minutes; BENCHFLAGS passes flags (go run ./bench -h).
# docs/performance.md records the figures.
BENCHFLAGS ?=
bench:
	$(GO) run ./bench $(BENCHFLAGS)

# The Go benchmarks of single store operations (go test -bench); they
# print their figures too.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Every Fuzz* target (dag spec parser, API request decoders, config
# loader) for FUZZTIME each. `make test` already runs their seed corpora.
# go test -fuzz takes one target per run, hence the loop.
FUZZTIME ?= 30s
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for name in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -d' ' -f2); do \
	    echo "== $$dir $$name ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

clean:
	rm -rf bin web/node_modules web/test-output
	find web/console/ui/vendor -type f ! -name README.md -delete
