#!/usr/bin/env bash
# make run: start Vigil Lite (private PostgreSQL, example DAGs, 2 in-process
# agents), trigger the pipeline DAG, follow it to the end, then stop Lite.
# Exit status is the run's: 0 on success, 3 when it failed.
set -euo pipefail
BIN=${BIN:-bin/vigil}
DATA=${VIGIL_DATA_DIR:-.vigil}
LISTEN=${VIGIL_LISTEN:-127.0.0.1:8080}
DAG=${VIGIL_DEMO_DAG:-pipeline}
LINGER=${VIGIL_DEMO_LINGER:-0} # seconds to keep Lite up after the run, for inspection
export VIGIL_SERVER="http://$LISTEN" VIGIL_DATA_DIR="$DATA"
unset VIGIL_TOKEN || true
mkdir -p "$DATA"
log="$DATA/lite.log"

"$BIN" lite --data-dir "$DATA" --dags examples --agents 2 --listen "$LISTEN" --log-format text >"$log" 2>&1 &
pid=$!
stop() {
  if kill -0 "$pid" 2>/dev/null; then
    echo "==> stopping vigil lite (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}
trap stop EXIT INT TERM

echo "==> starting vigil lite on $LISTEN (log: $log); web console: http://$LISTEN/ (token in $DATA/operator.token)"
for i in $(seq 1 240); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "vigil lite exited during start-up; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  if "$BIN" dags list >/dev/null 2>&1; then break; fi
  sleep 0.5
done
"$BIN" dags list
echo "==> triggering $DAG (another terminal can run: $BIN runs list / runs show ID / logs ID TASK)"
set +e
"$BIN" runs trigger "$DAG" --wait
rc=$?
set -e
echo "==> runs"
"$BIN" runs list --limit 5
if [ "$LINGER" -gt 0 ]; then
  echo "==> keeping vigil lite up for ${LINGER}s: try $BIN runs show 1, $BIN runs events 1, $BIN logs 1 generate"
  sleep "$LINGER"
fi
exit $rc
