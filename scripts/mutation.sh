#!/usr/bin/env bash
# make mutation: a mutation-testing run (gremlins, adr/0033) over the code
# that decides harm: reaper/ and leader/ with their own tests, and the
# store's fence, reap, claim, completion and heartbeat files with the
# store's tests. Gremlins mutates one covered expression at a time and
# re-runs the tests; a mutant the tests still pass LIVED. Efficacy is
# killed / (killed + lived); mutant coverage is covered / all. Each
# target prints both; the run exits non-zero when a target is below
# MUTATION_EFFICACY or MUTATION_COVERAGE (90 by default). Survivors
# judged equivalent are listed in docs/reliability.md ("Mutation score").
#
# Left out: files built only with a mutant_* tag (the hand-made mutants
# of `make mutants`, never compiled in the tested build), the store's
# other files, and the test helpers under the targets (leader/etcdtest,
# reaper/reapertest).
#
# Gremlins runs once per file, each time with only the package's tests
# that execute that file: go test's -run, which every `go test` gremlins
# starts inherits through GOFLAGS. The selection is measured, not
# guessed: a coverage build of the package's tests runs each test alone
# and keeps, per file, the tests that execute a statement of it (blocks
# that every test executes, such as package initialisation, select
# nothing: any selected test runs them too). A test that executes no
# statement of a file cannot notice a change to it, so per file the
# selection kills exactly the mutants the package's whole suite would;
# what it saves is time. Set VIGIL_TEST_DATABASE_URL (storetest) to
# measure against one PostgreSQL server instead of a throwaway cluster
# per test.
#
# MUTATION_SELECTION=DIR keeps each file's measured selection in DIR
# and reuses it on the next run instead of measuring again (about 15
# minutes for the store); see reuse_selection.
#
# MUTATION_DRY_RUN=1 only finds and counts the mutants (no tests run per
# mutant). MUTATION_WORKERS is gremlins' --workers (1 by default: each
# worker builds and runs a package's tests, and the store's tests start
# PostgreSQL databases). MUTATION_TARGETS picks targets (default "reaper leader
# store"), MUTATION_FILES the files (base names without .go, default all
# of each target), MUTATION_REPORTS a directory to keep gremlins' JSON
# reports in (one per file; `go run ./internal/mutationscore
# reaper=DIR/reaper-x.json ...` scores them again). See
# docs/reliability.md for the times measured.
set -uo pipefail
cd "$(dirname "$0")/.."

GREMLINS_VERSION=v0.6.0
bin="$PWD/bin/gremlins-$GREMLINS_VERSION"
if [ ! -x "$bin" ]; then
  echo "installing gremlins $GREMLINS_VERSION into bin/ (go install, from the Go module proxy)"
  GOBIN="$PWD/bin/gremlins.tmp" go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION" || exit 2
  mv "$PWD/bin/gremlins.tmp/gremlins" "$bin" && rm -rf "$PWD/bin/gremlins.tmp"
fi

efficacy=${MUTATION_EFFICACY:-90}
coverage=${MUTATION_COVERAGE:-90}
targets=${MUTATION_TARGETS:-reaper leader store}
store_files=${MUTATION_STORE_FILES:-fence reap claim complete complete_batch heartbeat}

failed=0
reports=()
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# files TARGET prints the base names of the files mutated in TARGET.
files() {
  local f b
  for f in "$1"/*.go; do
    b=$(basename "$f" .go)
    case $b in *_test) continue ;; esac
    grep -q '^//go:build mutant_' "$f" && continue
    [ "$1" = store ] && ! [[ $b =~ ^(fence|reap|claim|complete|complete_batch|heartbeat)$ ]] && continue
    if [ -n "${MUTATION_FILES:-}" ] && ! [[ " $MUTATION_FILES " == *" $b "* ]]; then continue; fi
    echo "$b"
  done
}

# select_tests TARGET FILE... writes $out/TARGET-FILE.run, the -run
# pattern of TARGET's tests that execute FILE.
select_tests() {
  local target=$1 t f tests all
  shift
  if [ -n "${MUTATION_SELECTION:-}" ] && reuse_selection "$target" "$@"; then
    return 0
  fi
  echo "== mutation: measuring which $target tests execute each file"
  go test -c -cover -coverpkg="./$target" -o "$out/$target.test" "./$target" || return 1
  mkdir -p "$out/cov-$target"
  tests=$(cd "$target" && "$out/$target.test" -test.list '^Test' | grep '^Test')
  all=$(echo "$tests" | wc -w)
  for t in $tests; do
    (cd "$target" && "$out/$target.test" -test.run "^$t\$" -test.count 1 -test.coverprofile "$out/cov-$target/$t") \
      >"$out/test.log" 2>&1 || { echo "$target test $t failed alone:"; tail -20 "$out/test.log"; return 1; }
  done
  for f in "$@"; do
    awk -v file="/$target/$f.go:" -v all="$all" \
      'index($1, file) && $NF > 0 {n[$1]++} END {for (b in n) if (n[b] < all) print b}' "$out/cov-$target"/* >"$out/blocks"
    local sel=()
    for t in $tests; do
      awk 'NR == FNR {b[$1]; next} ($1 in b) && $NF > 0 {hit = 1} END {exit !hit}' "$out/blocks" "$out/cov-$target/$t" && sel+=("$t")
    done
    echo "   $f.go: ${#sel[@]} of $all tests"
    (IFS='|'; echo "^(${sel[*]})\$") >"$out/$target-$f.run"
  done
  [ -z "${MUTATION_SELECTION:-}" ] || { mkdir -p "$MUTATION_SELECTION" && cp "$out/$target"-*.run "$MUTATION_SELECTION/"; }
}

# reuse_selection TARGET FILE... copies the -run patterns a run kept in
# $MUTATION_SELECTION into $out when every FILE has one, and says so;
# it fails (and the caller measures) when one is missing. A kept
# selection lacks the tests written since it was measured: a subset of
# the tests kills at most the mutants the whole selection kills, so a
# stale one can only understate the score. Delete its file to measure
# again.
reuse_selection() {
  local target=$1 f
  shift
  for f in "$@"; do
    [ -f "$MUTATION_SELECTION/$target-$f.run" ] || return 1
  done
  for f in "$@"; do
    cp "$MUTATION_SELECTION/$target-$f.run" "$out/$target-$f.run"
    echo "   $f.go: the test selection kept in $MUTATION_SELECTION"
  done
}

# unleash TARGET NAME RUN FILE... runs gremlins on TARGET's FILEs (every
# other file excluded) with the tests matching RUN, into $out/NAME.json.
unleash() {
  local target=$1 name=$2 run=$3 g start rc
  shift 3
  local args=(unleash --workers "${MUTATION_WORKERS:-1}" --timeout-coefficient 5 --output "$out/${name//\//-}.json")
  [ -n "${MUTATION_DRY_RUN:-}" ] && args+=(--dry-run)
  while IFS= read -r g; do  # paths relative to the target
    [[ " $* " == *" ${g%.go} "* ]] || args+=(--exclude-files "^$g\$")
  done < <(cd "$target" && find . -name '*.go' ! -name '*_test.go' | sed 's|^\./||')
  echo "== mutation: $name"
  start=$(date +%s)
  # A mutant's timeout is the coverage run's time times the coefficient.
  # That run would reuse a cached test binary and time only the tests,
  # while every mutant recompiles and relinks: a link flag unique to this
  # run makes the coverage run link too, so the timeout covers a build.
  GOFLAGS="-run=$run -ldflags=-X=main.mutationRun=$$.$start" "$bin" "${args[@]}" "./$target" 2>&1 |
    grep --line-buffered -E "LIVED|TIMED OUT|NOT COVERED|Killed:|Timed out:|Runnable:|Mutator coverage|Test efficacy|completed|rror"
  rc=${PIPESTATUS[0]}
  echo "   $name took $(($(date +%s) - start))s, gremlins exit $rc"
  [ "$rc" -eq 0 ] || failed=1
  # A file without a mutant (leader/leader.go) gets no report.
  [ -f "$out/${name//\//-}.json" ] || { echo "   $name: no mutant, no report"; return; }
  reports+=("$target=$out/${name//\//-}.json")
  [ -z "${MUTATION_REPORTS:-}" ] || { mkdir -p "$MUTATION_REPORTS" && cp "$out/${name//\//-}.json" "$MUTATION_REPORTS/"; }
}

for target in $targets; do
  case $target in
    reaper|leader|store) ;;
    *) echo "unknown target $target (want reaper, leader or store)"; exit 2 ;;
  esac
  mapfile -t mutated < <(files "$target")
  if [ -n "${MUTATION_DRY_RUN:-}" ]; then  # one pass over all the files, with all the tests
    unleash "$target" "$target" '^Test' "${mutated[@]}"
    continue
  fi
  select_tests "$target" "${mutated[@]}" || exit 2
  for f in "${mutated[@]}"; do
    unleash "$target" "$target/$f.go" "$(cat "$out/$target-$f.run")" "$f"
  done
done
# The score is counted from the per-file reports: gremlins' own totals
# also count the files --exclude-files left out. A dry run has no
# efficacy, only coverage.
[ -n "${MUTATION_DRY_RUN:-}" ] && efficacy=0
echo "== mutation score"
go run ./internal/mutationscore -efficacy "$efficacy" -coverage "$coverage" "${reports[@]}" || failed=1
exit $failed
