#!/usr/bin/env bash
# make mutants: builds each mutant of the code that decides harm (behind a
# build tag that no shipped build sets) and runs the part of the suite
# that must catch it. A mutant is killed when that part fails for the
# mutant's reason (its output matches the expected pattern); one that
# passes survived, and one that fails for another reason (a build error, a
# hang cut by the timeout) is broken. Exit 0 only when every mutant was
# killed (docs/reliability.md, "Mutants").
set -uo pipefail
cd "$(dirname "$0")/.."

# name | tag | expected pattern in the failing output | go test arguments
mutants=(
  "agent-lost reaper at half its threshold|mutant_reaper_early|\[1 no live execution failed\]|-timeout 12m -v -run ^TestShortChaosRun\$ ./chaos/"
  "fence check without its row lock|mutant_fence_nolock|a deposed leader's write committed after the fence moved|-timeout 5m -run ^TestProFenceRowLockKeepsADeposedLeaderOut\$ ./e2e/"
  "batch completion route without the credential check|mutant_completions_open|completions as agent [0-9]+ with another agent's credential|-run ^TestAgentCannotActAsAnotherAgent\$ ./api/"
)
if [ -n "${MUTANTS:-}" ]; then
  echo "only the mutants whose tag matches MUTANTS=$MUTANTS"
fi

failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for m in "${mutants[@]}"; do
  IFS='|' read -r name tag pattern args <<<"$m"
  if [ -n "${MUTANTS:-}" ] && [[ "$tag" != *"$MUTANTS"* ]]; then
    continue
  fi
  echo "== mutant: $name (-tags $tag)"
  start=$(date +%s)
  # shellcheck disable=SC2086 # args is a list of words
  VIGIL_BUILD_TAGS=$tag go test -count=1 -tags "$tag" $args >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  if [ $rc -eq 0 ]; then
    echo "   SURVIVED in ${took}s: go test -tags $tag $args passed"
    failed=1
  elif grep -Eq "$pattern" "$log"; then
    echo "   killed in ${took}s: $(grep -Em1 "$pattern" "$log" | sed 's/^[[:space:]]*//' | cut -c1-200)"
  else
    echo "   BROKEN in ${took}s: the tests failed, but not for this mutant's reason (no match for /$pattern/):"
    tail -30 "$log" | sed 's/^/   | /'
    failed=1
  fi
done
exit $failed
