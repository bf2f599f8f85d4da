#!/usr/bin/env bash
# Side-by-side 3-node benchmark (issue 15): a 3-node Sibyl cluster (`sibyl
# cluster`, release build) vs a 3-node Apache Cassandra 5.0.4 cluster (1 GB
# heap each), both on 127.0.0.1-3 of this machine, RF 3, latte's kv.rn at
# QUORUM, writes then reads, one after the other in the same run.
#
#   bench/compare_cluster.sh [DURATION] [CONCURRENCY]     (defaults: 30s, 32)
#
# Needs: `cargo build --release --bin sibyl`, `cargo install latte-cli`,
# ../shared/cassandra/. Prints ops/s, p50, p99 and each cluster's total RSS
# (the three processes after the run); latte's reports land in
# bench/results/cluster-<timestamp>/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
dur="${1:-30s}"
conc="${2:-32}"
rows="${ROWS:-100000}"
out="$here/results/cluster-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
sibyl="$root/target/release/sibyl"
hosts="127.0.0.1 127.0.0.2 127.0.0.3"

rss_total_mb() { # pids -> MB
  local t=0
  for p in "$@"; do t=$(( t + $(awk '/VmRSS/ {print $2}' "/proc/$p/status") )); done
  echo $(( t / 1024 ))
}

bench_one() { # name
  local name="$1"
  latte schema "$here/kv.rn" -P rf=3 $hosts > /dev/null
  latte load "$here/kv.rn" -P rf=3 -P rows="$rows" --consistency QUORUM $hosts > /dev/null
  for fn in write read; do
    latte run "$here/kv.rn" -f "$fn" -P rf=3 -P rows="$rows" --consistency QUORUM -p "$conc" -d "$dur" \
      -o "$out/$name-$fn.json" $hosts > "$out/$name-$fn.txt" 2>&1
  done
}

. "$here/lib.sh"   # summary

echo "== Sibyl: 3 nodes"
"$sibyl" cluster create --dir "$out/sibyl" --nodes 3 --start > /dev/null
spids=$(for n in 1 2 3; do cat "$out/sibyl/node$n/sibyl.pid"; echo; done)
bench_one sibyl
sibyl_rss=$(rss_total_mb $spids)
# every node holds the writes (RF 3): each replica's local write count
for n in 1 2 3; do
  echo "node$n $("$sibyl" nodetool -h 127.0.0.$n -p 7199 tablestats latte.kv | grep -m1 'Local write count')"
done | tee "$out/sibyl-replica-writes.txt"
"$sibyl" cluster stop --dir "$out/sibyl" > /dev/null
rm -rf "$out/sibyl/node"*/data

echo "== Cassandra 5.0.4: 3 nodes"
cpids=""
for n in 1 2 3; do
  cpids="$cpids $("$cassandra_sh/start.sh" --dir "$out/cassandra$n" --address "127.0.0.$n" --seeds 127.0.0.1 \
    --heap 1G --port 9042 | tail -1)"
done
bench_one cassandra
c_rss=$(rss_total_mb $cpids)
for n in 1 2 3; do "$cassandra_sh/stop.sh" --dir "$out/cassandra$n" > /dev/null 2>&1 || true; done
rm -rf "$out/cassandra"*/data "$out/cassandra"*/lib

{
  echo "| cluster | op | ops/s | p50 ms | p99 ms |"
  echo "|---|---|---|---|---|"
  for s in sibyl cassandra; do for fn in write read; do
    read ops p50 p99 < <(summary "$out/$s-$fn.json")
    echo "| $s | $fn | $ops | $p50 | $p99 |"
  done; done
  echo
  echo "| cluster | total RSS of 3 nodes after the run, MB |"
  echo "|---|---|"
  echo "| sibyl | $sibyl_rss |"
  echo "| cassandra | $c_rss |"
} | tee "$out/summary.md"
