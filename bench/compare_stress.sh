#!/usr/bin/env bash
# The same `sibyl stress` command against Sibyl and against Apache Cassandra
# 5.0.4 on this machine, both runs overlaid in one HTML graph; plus latte on
# the same workload for the client's CPU per operation.
#
#   bench/compare_stress.sh [N] [THREADS]      (defaults: 300000, 32)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
n="${1:-300000}"
threads="${2:-32}"
out="$here/results/stress-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
sibyl="$root/target/release/sibyl"
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
pkill -f "target/release/sibyl" 2>/dev/null || true

run_stress() { # port revision
  "$sibyl" stress write n="$n" no-warmup -rate threads="$threads" -pop seq=1.."$n" -port native="$1" \
    -graph file="$out/stress.html" title="sibyl stress write n=$n threads=$threads" revision="$2-write" | tee "$out/$2-write.txt" | tail -16
  "$sibyl" stress read n="$n" no-warmup -rate threads="$threads" -pop seq=1.."$n" -port native="$1" \
    -graph file="$out/stress.html" revision="$2-read" | tee "$out/$2-read.txt" | tail -16
}

echo "== Sibyl"
start_sibyl "$out"
run_stress 9042 sibyl
echo "== latte on Sibyl (client CPU per operation)"
(cd "$out" && latte schema "$here/kv.rn" 127.0.0.1:9042 > /dev/null && latte run "$here/kv.rn" -f write 127.0.0.1:9042 -p "$threads" -d "$n" > "$out/latte-write.txt" 2>&1) || true
grep -E "CPU time|Cycles|Throughput" "$out/latte-write.txt" | head -3
kill $spid; wait $spid || true

echo "== Cassandra"
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
"$cassandra_sh/start.sh" --port 9043 > /dev/null
run_stress 9043 cassandra
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
echo "graph: $out/stress.html"
