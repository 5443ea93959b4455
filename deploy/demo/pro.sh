#!/usr/bin/env bash
# make pro-demo: a real etcd (embedded, from deploy/demo/etcd), a private
# PostgreSQL (deploy/demo/postgres), 3 `vigil server` replicas and 2
# agents on loopback. It runs a DAG, kills the leader with -9 mid-run,
# shows the new leader taking over and the run finishing, then stops
# everything it started (by pid).
set -euo pipefail
BIN=${BIN:-bin/vigil}
WORK=${WORK:-$(mktemp -d /tmp/vigil-pro-demo.XXXXXX)}
ETCD_PORT=${ETCD_PORT:-12379}
BASE_PORT=${BASE_PORT:-18091}
AGENT_TOKEN=demo-agent-token
OP_TOKEN=demo-operator-token
pids=()

cleanup() {
  echo "==> stopping everything"
  for ((i=${#pids[@]}-1; i>=0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "logs are in $WORK"
}
trap cleanup EXIT INT TERM

go build -o "$WORK/etcd" ./deploy/demo/etcd
go build -o "$WORK/postgres" ./deploy/demo/postgres

echo "==> etcd on 127.0.0.1:$ETCD_PORT"
"$WORK/etcd" --data-dir "$WORK/etcd-data" --listen "127.0.0.1:$ETCD_PORT" --peer "127.0.0.1:$((ETCD_PORT + 1))" >"$WORK/etcd.log" 2>&1 &
pids+=($!)
echo "==> PostgreSQL"
"$WORK/postgres" --dir "$WORK/pg" >"$WORK/postgres.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do grep -q '^postgres://' "$WORK/postgres.log" && break; sleep 0.5; done
DB=$(grep -m1 '^postgres://' "$WORK/postgres.log")
grep -q 'etcd ready' "$WORK/etcd.log" || sleep 2

urls=()
declare -A server_pid
for i in 1 2 3; do
  port=$((BASE_PORT + i - 1))
  "$BIN" server --database-url "$DB" --etcd-endpoints "127.0.0.1:$ETCD_PORT" --listen "127.0.0.1:$port" \
    --replica-id "replica-$i" --agent-token "$AGENT_TOKEN" --operator-token "$OP_TOKEN" \
    --election-ttl 3s --heartbeat-interval 2s --agent-lost-threshold 10s --log-format text >"$WORK/server-$i.log" 2>&1 &
  pids+=($!)
  server_pid[replica-$i]=$!
  urls+=("http://127.0.0.1:$port")
done
servers=$(IFS=,; echo "${urls[*]}")

health_leader() { # prints the id of the replica that says it leads
  for u in "${urls[@]}"; do
    out=$(curl -s --max-time 1 "$u/monitor/health" 2>/dev/null || true)
    case "$out" in *'"leading":true'*) echo "$out" | sed -n 's/.*"self":"\([^"]*\)".*/\1/p'; return;; esac
  done
}
echo "==> 3 replicas starting; waiting for a leader"
leader=""
for _ in $(seq 1 100); do leader=$(health_leader); [ -n "$leader" ] && break; sleep 0.2; done
[ -n "$leader" ] || { echo "no leader elected" >&2; exit 1; }
echo "    leader: $leader"

for a in 1 2; do
  "$BIN" agent --server "$servers" --token "$AGENT_TOKEN" --name "demo-agent-$a" --capacity 2 --log-format text >"$WORK/agent-$a.log" 2>&1 &
  pids+=($!)
done

export VIGIL_SERVER="${urls[1]}" VIGIL_TOKEN="$OP_TOKEN"
"$BIN" dags apply deploy/demo/pro-chain.yaml
run=$("$BIN" runs trigger pro-chain | sed -n 's/^run \([0-9]*\) .*/\1/p')
echo "==> run $run triggered; waiting until it runs"
for _ in $(seq 1 60); do "$BIN" runs show "$run" | grep -q 'extract *running' && break; sleep 0.5; done
sleep 2

echo "==> kill -9 the leader ($leader, pid ${server_pid[$leader]})"
t0=$(date +%s%N)
kill -9 "${server_pid[$leader]}"
new=""
while [ -z "$new" ] || [ "$new" = "$leader" ]; do new=$(health_leader); sleep 0.05; done
t1=$(date +%s%N)
echo "    new leader: $new after $(( (t1 - t0) / 1000000 )) ms (election TTL 3s)"

for u in "${urls[@]}"; do
  if curl -s --max-time 1 "$u/healthz" >/dev/null 2>&1; then export VIGIL_SERVER=$u; break; fi
done
echo "==> waiting for run $run to finish"
for _ in $(seq 1 120); do
  state=$("$BIN" runs show "$run" | sed -n 's/^State: *//p')
  case "$state" in success|failed|cancelled) break;; esac
  sleep 1
done
"$BIN" runs show "$run"
"$BIN" runs events "$run"
[ "$state" = success ] || { echo "run ended $state" >&2; exit 1; }
echo "==> run $run succeeded across the failover"
