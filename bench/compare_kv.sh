#!/usr/bin/env bash
# Side-by-side key-value benchmark: Sibyl vs Apache Cassandra 5.0.4 on this
# machine, same load generator (latte), same workload (bench/kv.rn), same run.
#
#   bench/compare_kv.sh [DURATION] [CONCURRENCY]     (defaults: 20s, 32)
#   ROWS=2000000 SIBYL_EXTRA='memtable_heap_space: 64MiB' bench/compare_kv.sh 30s 32
#     (a data set many times the memtable bound: reads come from SSTables)
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

rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }

wait_port() { # port -> ms waited
  local start=$(date +%s%N)
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do sleep 0.01; done
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}

bench_one() { # name port
  local name="$1" port="$2"
  latte schema "$here/kv.rn" "127.0.0.1:$port" > /dev/null
  latte load "$here/kv.rn" "127.0.0.1:$port" -P rows="${ROWS:-100000}" > /dev/null
  for fn in write read; do
    latte run "$here/kv.rn" -f "$fn" "127.0.0.1:$port" -p "$conc" -d "$dur" -P rows="${ROWS:-100000}" \
      -o "$out/$name-$fn.json" > "$out/$name-$fn.txt" 2>&1
  done
}

. "$here/lib.sh"   # summary

echo "== Sibyl"
rm -rf "$out/sibyl-data" && mkdir -p "$out/sibyl-data"
cat > "$out/sibyl.yaml" <<YAML
native_transport_port: 9042
data_file_directories: [$out/sibyl-data/data]
commitlog_directory: $out/sibyl-data/commitlog
${SIBYL_EXTRA:-}
YAML
"$root/target/release/sibyl" --config "$out/sibyl.yaml" > "$out/sibyl.log" 2>&1 &
spid=$!
sibyl_start_ms=$(wait_port 9042)
sleep 2
sibyl_idle_rss=$(rss_mb $spid)
bench_one sibyl 9042
sibyl_load_rss=$(rss_mb $spid)
kill $spid; wait $spid || true

echo "== Cassandra"
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
cstart=$(date +%s%N)
cpid=$("$cassandra_sh/start.sh" --port 9043 | tail -1)   # returns at "Startup complete"
wait_port 9043 > /dev/null
c_start_ms=$(( ($(date +%s%N) - cstart) / 1000000 ))
sleep 5
c_idle_rss=$(rss_mb $cpid)
bench_one cassandra 9043
c_load_rss=$(rss_mb $cpid)
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true

{
  echo "| server | op | ops/s | p50 ms | p99 ms |"
  echo "|---|---|---|---|---|"
  for s in sibyl cassandra; do for fn in write read; do
    read ops p50 p99 < <(summary "$out/$s-$fn.json")
    echo "| $s | $fn | $ops | $p50 | $p99 |"
  done; done
  echo
  echo "| server | start-up ms | idle RSS MB | RSS after load MB |"
  echo "|---|---|---|---|"
  echo "| sibyl | $sibyl_start_ms | $sibyl_idle_rss | $sibyl_load_rss |"
  echo "| cassandra | $c_start_ms | $c_idle_rss | $c_load_rss |"
} | tee "$out/summary.md"
