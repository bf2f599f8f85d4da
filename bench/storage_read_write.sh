#!/usr/bin/env bash
# Storage benchmark (a) of the storage issue: a data set several times larger
# than the memtable bound, written, then read uniformly at random, with the
# same `sibyl stress` commands against Sibyl and against Apache Cassandra
# 5.0.4 on this machine, one after the other. Rows are one 100-byte column.
#
#   bench/storage_read_write.sh [ROWS] [READS] [THREADS]   (defaults: 5000000 2000000 32)
#
# Writes bench/results/storage-*/summary.txt (ops/s, p50, p99 per server and
# phase), the stress outputs, and one HTML graph overlaying all four runs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
rows="${1:-5000000}"
reads="${2:-2000000}"
threads="${3:-32}"
out="$here/results/storage-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
sibyl="$root/target/release/sibyl"
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
[ -x "$sibyl" ] || (cd "$root" && cargo build --release -p sibyl)
need_disk 8 "$out"   # 2026-11-27: 0.8 GB (Sibyl) and about as much for Cassandra

phase() { # port revision
  "$sibyl" stress write n="$rows" no-warmup -rate threads="$threads" -pop seq=1.."$rows" -col n=FIXED\(1\) size=FIXED\(100\) \
    -port native="$1" -graph file="$out/storage.html" title="write $rows rows of 100 bytes, then $reads uniform random reads" \
    revision="$2-write" > "$out/$2-write.txt"
  "$sibyl" stress read n="$reads" no-warmup -rate threads="$threads" -pop dist=UNIFORM\(1.."$rows"\) -col n=FIXED\(1\) size=FIXED\(100\) \
    -port native="$1" -graph file="$out/storage.html" revision="$2-read" > "$out/$2-read.txt"
  for p in write read; do
    printf '%-10s %-5s %s | %s | %s | %s\n' "$2" "$p" \
      "$(grep -m1 '^Op rate' "$out/$2-$p.txt")" "$(grep -m1 '^Latency median' "$out/$2-$p.txt")" \
      "$(grep -m1 '^Latency 99th percentile' "$out/$2-$p.txt")" "$(grep -m1 '^Total errors' "$out/$2-$p.txt" || true)" | tee -a "$out/summary.txt"
  done
}

echo "== Sibyl ($rows rows, $reads reads, $threads threads)"
start_sibyl "$out"
phase 9042 sibyl
"$sibyl" nodetool tablestats keyspace1.standard1 > "$out/sibyl-tablestats.txt" 2>&1 || true
du -sh "$out/sibyl-data" | tee -a "$out/summary.txt"
kill $spid; wait $spid || true
drop_data "$out"

echo "== Cassandra"
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
"$cassandra_sh/start.sh" --port 9043 > /dev/null
phase 9043 cassandra
if [ "${KEEP_DATA:-0}" = 1 ]; then
  "$cassandra_sh/stop.sh" > /dev/null 2>&1 || true
else
  "$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
fi
echo "summary: $out/summary.txt   graph: $out/storage.html"
