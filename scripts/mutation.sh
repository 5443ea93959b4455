#!/usr/bin/env bash
# make mutation: a mutation-testing run (gremlins, adr/0033) over the code
# that decides harm: reaper/ and leader/ with their own tests, and the
# store's fence, reap, claim, completion and heartbeat files with the
# store tests that execute them. Gremlins mutates one covered expression
# at a time and re-runs the tests; a mutant the tests still pass LIVED.
# Efficacy is killed / (killed + lived); mutant coverage is covered /
# all. Each target prints both; the run exits non-zero when a target is
# below MUTATION_EFFICACY or MUTATION_COVERAGE (90 by default). Survivors
# judged equivalent are listed in docs/reliability.md ("Mutation score").
#
# Left out of every target: files built only with a mutant_* tag (the
# hand-made mutants of `make mutants`, never compiled in the tested
# build) and leader/etcdtest (the embedded etcd the tests start, not code
# that decides anything).
#
# The store target runs gremlins once per decision file, each time with
# only the store tests that execute that file (go test's -run, passed to
# every `go test` gremlins starts through GOFLAGS, which it inherits).
# The selection is measured, not guessed: a coverage build of the store's
# tests runs each test alone and keeps, per file, the tests that execute
# a statement of it, ignoring the blocks every test executes (package
# initialisation, which any selected test runs too). A test that executes
# no statement of a file cannot notice a change to it, so the selection
# kills exactly the mutants the whole suite would kill; what it leaves
# out is only time. Set VIGIL_TEST_DATABASE_URL (storetest) to measure it
# against one server instead of a throwaway cluster per test.
#
# MUTATION_DRY_RUN=1 only finds and counts the mutants (no tests run per
# mutant). MUTATION_TARGETS picks targets (default "reaper leader
# store"), MUTATION_STORE_FILES the store's decision files (default all
# six). See docs/reliability.md for the times measured.
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

# excludes DIR prints --exclude-files arguments (paths relative to DIR)
# for the files of DIR built only with a mutant_* tag.
excludes() {
  local f
  for f in $(grep -rl --include='*.go' '^//go:build mutant_' "$1"); do
    printf -- '--exclude-files\n^%s$\n' "${f#"$1"/}"
  done
}

# store_selection writes $out/store-<file>.run, the -run pattern of the
# store tests that execute each decision file.
store_selection() {
  echo "== mutation: measuring which store tests execute each decision file"
  go test -c -cover -coverpkg=./store -o "$out/store.test" ./store || return 1
  mkdir -p "$out/cov"
  local t f tests
  tests=$(cd store && "$out/store.test" -test.list '^Test' | grep '^Test')
  for t in $tests; do
    (cd store && "$out/store.test" -test.run "^$t\$" -test.count 1 -test.coverprofile "$out/cov/$t") >"$out/test-$t.log" 2>&1 ||
      { echo "store test $t failed alone:"; tail -20 "$out/test-$t.log"; return 1; }
  done
  for f in $store_files; do
    # the file's blocks some test executes and some does not
    awk -v file="/store/$f.go:" -v all="$(echo "$tests" | wc -w)" \
      'index($1, file) && $NF > 0 {n[$1]++} END {for (b in n) if (n[b] < all) print b}' "$out"/cov/Test* >"$out/store-$f.blocks"
    local sel=()
    for t in $tests; do
      awk 'NR == FNR {b[$1]; next} ($1 in b) && $NF > 0 {hit = 1} END {exit !hit}' "$out/store-$f.blocks" "$out/cov/$t" && sel+=("$t")
    done
    echo "   $f.go: ${#sel[@]} tests"
    local IFS='|'
    echo "^(${sel[*]})\$" >"$out/store-$f.run"
  done
}

# unleash NAME DIR REPORT [ARGS...] runs gremlins on DIR and prints its
# verdicts.
unleash() {
  local name=$1 dir=$2 report=$3
  shift 3
  local args=(unleash --workers 1 --timeout-coefficient 3 --output "$report" "$@")
  [ -n "${MUTATION_DRY_RUN:-}" ] && args+=(--dry-run)
  echo "== mutation: $name"
  local start rc
  start=$(date +%s)
  "$bin" "${args[@]}" "./$dir" 2>&1 | grep --line-buffered -E "LIVED|TIMED OUT|NOT COVERED|Killed:|Timed out:|Runnable:|Mutator coverage|Test efficacy|completed|rror"
  rc=${PIPESTATUS[0]}
  echo "   $name took $(($(date +%s) - start))s, gremlins exit $rc"
  [ "$rc" -eq 0 ] || failed=1
}

for target in $targets; do
  case $target in
    reaper)
      mapfile -t ex < <(excludes reaper)
      unleash reaper reaper "$out/reaper.json" "${ex[@]}"
      reports+=("reaper=$out/reaper.json") ;;
    leader)
      mapfile -t ex < <(excludes leader)
      unleash leader leader "$out/leader.json" "${ex[@]}" --exclude-files '^etcdtest/'
      reports+=("leader=$out/leader.json") ;;
    store)
      store_selection || exit 2
      for f in $store_files; do
        ex=()
        for g in store/*.go; do
          b=$(basename "$g" .go)
          case $b in *_test) continue ;; esac
          [ "$b" = "$f" ] || ex+=(--exclude-files "^$b\\.go\$")
        done
        GOFLAGS="-run=$(cat "$out/store-$f.run")" unleash "store/$f.go" store "$out/store-$f.json" "${ex[@]}"
        reports+=("store=$out/store-$f.json")
      done ;;
    *) echo "unknown target $target (want reaper, leader or store)"; exit 2 ;;
  esac
done
[ -n "${MUTATION_DRY_RUN:-}" ] && exit $failed
# The score is counted from the per-file reports: gremlins' own totals
# also count the files --exclude-files left out.
echo "== mutation score"
go run ./internal/mutationscore -efficacy "$efficacy" -coverage "$coverage" "${reports[@]}" || failed=1
exit $failed
