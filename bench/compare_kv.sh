#!/usr/bin/env bash
# Side-by-side key-value benchmark: Sibyl vs Apache Cassandra 5.0.4 on this
# machine, same load generator (latte), same workload (bench/kv.rn), same run.
#
#   bench/compare_kv.sh [DURATION] [CONCURRENCY]     (defaults: 20s, 32)
#   ROWS=2000000 SIBYL_EXTRA='memtable_heap_space: 64MiB' bench/compare_kv.sh 30s 32
#     (a data set many times the memtable bound: reads come from SSTables)
#   SIBYLS="before=/tmp/old/sibyl after=target/release/sibyl" ROUNDS=2 bench/compare_kv.sh
#     (two builds of Sibyl, alternately, ROUNDS times each, then Cassandra once:
#     the cost of a change measured beside Cassandra in the same run)
#
# Needs: `cargo install latte-cli`, and ../shared/cassandra/start.sh for Cassandra.
# Prints ops/s, p50 and p99 of writes and reads, each server's idle RSS and
# start-up time, and writes latte's JSON reports under bench/results/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
dur="${1:-20s}"
conc="${2:-32}"
out="$here/results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
pkill -f "target/release/sibyl" 2>/dev/null || true

. "$here/lib.sh"   # rss_mb, wait_port, latte_kv, summary

sibyls="${SIBYLS:-sibyl=$root/target/release/sibyl}"
rounds="${ROUNDS:-1}"
labels=()
declare -A figures   # name -> "start-up ms, idle RSS, RSS after the load"
for round in $(seq 1 "$rounds"); do
  for entry in $sibyls; do
    label="${entry%%=*}" bin="${entry#*=}"
    name="$label"; [ "$rounds" -gt 1 ] && name="$label-$round"
    labels+=("$name")
    echo "== Sibyl: $name ($bin)"
    rm -rf "$out/$name-data" && mkdir -p "$out/$name-data"
    cat > "$out/$name.yaml" <<YAML
native_transport_port: 9042
data_file_directories: [$out/$name-data/data]
commitlog_directory: $out/$name-data/commitlog
${SIBYL_EXTRA:-}
YAML
    "$bin" --config "$out/$name.yaml" > "$out/$name.log" 2>&1 &
    spid=$!
    start_ms=$(wait_port 9042)
    sleep 2
    idle_rss=$(rss_mb $spid)
    latte_kv "$name" 9042
    figures[$name]="$start_ms $idle_rss $(rss_mb $spid)"
    kill $spid; wait $spid || true
    rm -rf "$out/$name-data"
  done
done

echo "== Cassandra"
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
cstart=$(date +%s%N)
cpid=$("$cassandra_sh/start.sh" --port 9043 | tail -1)   # returns at "Startup complete"
wait_port 9043 > /dev/null
c_start_ms=$(( ($(date +%s%N) - cstart) / 1000000 ))
sleep 5
c_idle_rss=$(rss_mb $cpid)
latte_kv cassandra 9043
c_load_rss=$(rss_mb $cpid)
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true

{
  echo "| server | op | ops/s | p50 ms | p99 ms |"
  echo "|---|---|---|---|---|"
  for s in "${labels[@]}" cassandra; do for fn in write read; do
    read ops p50 p99 < <(summary "$out/$s-$fn.json")
    echo "| $s | $fn | $ops | $p50 | $p99 |"
  done; done
  echo
  echo "| server | start-up ms | idle RSS MB | RSS after load MB |"
  echo "|---|---|---|---|"
  for s in "${labels[@]}"; do
    read st idle load <<< "${figures[$s]}"
    echo "| $s | $st | $idle | $load |"
  done
  echo "| cassandra | $c_start_ms | $c_idle_rss | $c_load_rss |"
} | tee "$out/summary.md"
