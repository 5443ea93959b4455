#!/usr/bin/env bash
# make mutation: a mutation-testing run (gremlins, adr/0033) over the code
# that decides harm: reaper/ and leader/ with their own tests, and the
# store's fence, reap, claim, completion and heartbeat files with the
# store's tests. Gremlins mutates one covered expression at a time and
# re-runs the package's tests; a mutant the tests still pass LIVED.
# Efficacy is killed / (killed + lived); mutant coverage is covered /
# all. Each target prints both; the run exits non-zero when a target is
# below MUTATION_EFFICACY or MUTATION_COVERAGE (90 by default). Survivors
# judged equivalent are listed in docs/reliability.md ("Mutation score").
#
# MUTATION_DRY_RUN=1 only finds and counts the mutants (seconds, no
# tests run per mutant). MUTATION_TARGETS picks targets (default "reaper leader store"). The
# store target re-runs the store's real-PostgreSQL tests per mutant and
# takes hours on 2 cores; see docs/reliability.md for the times measured.
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
# The store's decision code: every other non-test file of store/ is left
# unmutated (its tests still run).
store_keep='^(fence|reap|claim|complete|complete_batch|heartbeat)\.go$'

failed=0
reports=()
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for target in $targets; do
  args=(unleash --workers 1 --timeout-coefficient 3 --output "$out/$target.json")
  [ -n "${MUTATION_DRY_RUN:-}" ] && args+=(--dry-run)
  case $target in
    reaper|leader) ;;
    store)
      for f in store/*.go; do
        b=$(basename "$f")
        case $b in *_test.go) continue ;; esac
        [[ $b =~ $store_keep ]] || args+=(--exclude-files "^$b\$")  # paths are relative to the target
      done ;;
    *) echo "unknown target $target (want reaper, leader or store)"; exit 2 ;;
  esac
  echo "== mutation: $target"
  start=$(date +%s)
  "$bin" "${args[@]}" "./$target" 2>&1 | grep --line-buffered -E "LIVED|TIMED OUT|NOT VIABLE|Killed:|Timed out:|Runnable:|Mutator coverage|Test efficacy|completed|threshold|rror"
  rc=${PIPESTATUS[0]}
  echo "   $target took $(($(date +%s) - start))s, gremlins exit $rc"
  [ "$rc" -eq 0 ] || failed=1
  reports+=("$target=$out/$target.json")
done
[ -n "${MUTATION_DRY_RUN:-}" ] && exit $failed
# The score is counted from the per-file reports: gremlins' own totals
# also count the files --exclude-files left out.
echo "== mutation score"
go run ./internal/mutationscore -efficacy "$efficacy" -coverage "$coverage" "${reports[@]}" || failed=1
exit $failed
