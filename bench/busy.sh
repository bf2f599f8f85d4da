#!/usr/bin/env bash
# One matrix point, quickly, for A/B of settings on one build: latte OP (write,
# read or mix) at N in flight, ROUNDS rounds of 10 s against a fresh node
# (kv.rn's 100,000 rows loaded, no warm-up), each printing ops/s, the cores
# the server used, the cores the whole machine used, and the server's CPU
# per operation (from /proc, as matrix.sh counts them).
#
#   bench/busy.sh BIN OP N [ROUNDS] [pin]
#   SIBYL_NATIVE_REQUESTS_PER_TURN=16 bench/busy.sh target/release/sibyl write 128 2
#   NODURABLE=1 bench/busy.sh ...   (the keyspace made with durable_writes = false first)
#   bench/busy.sh BIN write 128 3 pin   (each native-transport event loop pinned to a core)
#   LATTE_ARGS="--threads 2" bench/busy.sh ...   (more of latte's own options; it runs one thread by default)
#   LATTE_PROCS=2 bench/busy.sh ...   (two latte processes, each with N/2 in flight, as matrix.sh runs them)
#   PERF="record -g -o /tmp/w.data" bench/busy.sh ...   (perf on the server during each round: `perf ARGS -p PID`)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sibyl="$(realpath "$1")" op=$2 n=$3 rounds=${4:-3} pin=${5:-}
procs=${LATTE_PROCS:-1}
out=$(mktemp -d /tmp/busy.XXXX)
. "$here/lib.sh"
start_sibyl "$out"
pid=$spid
# the node is gone before the script returns: the next run binds its port
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$out"' EXIT
if [ -n "${NODURABLE:-}" ]; then
  "$here/../.venv/bin/python" -c "
from cassandra.cluster import Cluster
Cluster(['127.0.0.1']).connect().execute(\"CREATE KEYSPACE latte WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = false\")"
fi
latte schema "$here/kv.rn" 127.0.0.1:9042 > /dev/null
latte load "$here/kv.rn" 127.0.0.1:9042 -P rows=100000 > /dev/null 2>&1
if [ -n "$pin" ]; then
  c=0
  for t in /proc/$pid/task/*; do
    # thread names are cut to 15 characters: "native-transpor"
    if [[ "$(cat "$t/comm")" == native-transpor* ]]; then
      taskset -p -c "$c" "${t##*/}" > /dev/null
      echo "event loop thread ${t##*/} pinned to core $c"
      c=$(( (c + 1) % $(nproc) ))
    fi
  done
fi
f=$op
[ "$op" = mix ] && f="read:0.9,write:0.1"
for r in $(seq "$rounds"); do
  s0=$(proc_ticks "$pid"); read -r b0 t0 st0 < <(machine_ticks)
  perf_pid=""
  if [ -n "${PERF:-}" ]; then
    # shellcheck disable=SC2086 # PERF is a list of perf's arguments
    perf $PERF -p "$pid" -- sleep 9 > "$out/perf$r.txt" 2>&1 &
    perf_pid=$!
  fi
  # shellcheck disable=SC2016,SC2086 # expanded by the inner shell; LATTE_ARGS is a list of options
  /usr/bin/time -f "%U %S" -o "$out/time$r" bash -c \
    'o=$1; p=$2; shift 2; for k in $(seq "$p"); do latte "$@" -o "$o.$k.json" > /dev/null 2>&1 & done; wait' \
    _ "$out/r$r" "$procs" run "$here/kv.rn" -f "$f" 127.0.0.1:9042 -p "$((n / procs))" -d 10s -P rows=100000 ${LATTE_ARGS:-}
  s1=$(proc_ticks "$pid"); read -r b1 t1 st1 < <(machine_ticks)
  if [ -n "$perf_pid" ]; then wait "$perf_pid" || true; cat "$out/perf$r.txt"; fi
  python3 - "$out/r$r" "$procs" "$r" "$((s1 - s0))" "$((b1 - b0))" "$((t1 - t0))" "$((st1 - st0))" "$(nproc)" "$(getconf CLK_TCK)" "$(cat "$out/time$r")" <<'PY'
import json, sys
path, procs, r = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sticks, busy, total, steal, ncpu, tck = map(int, sys.argv[4:10])
cu, cs = map(float, sys.argv[10].split())
ops = cycles = 0
for k in range(1, procs + 1):
    res = json.load(open(f"{path}.{k}.json"))["result"]
    ops += res["cycle_throughput"]["value"]
    cycles += res["cycle_count"]
secs = total / ncpu / tck  # the window measured: latte's start and end too
print(f"round {r}: {ops:,.0f} ops/s, server {sticks / tck / secs:.2f} cores, "
      f"machine {busy * ncpu / total:.2f} cores (stolen {steal * ncpu / total:.2f}), "
      f"server {sticks / tck * 1e6 / cycles:.2f} µs/op, latte {(cu + cs) * 1e6 / cycles:.2f} µs/op")
PY
done
