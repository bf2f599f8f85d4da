#!/usr/bin/env bash
# Storage benchmark (b) of the storage issue: the write-heavy 90/10 mix of
# bench/profiles/write-heavy-90-10.yaml for DURATION at THREADS threads, once per
# compaction strategy (STCS, LCS, TWCS), against Sibyl and then Apache
# Cassandra 5.0.4 on this machine, with the same `sibyl stress` command.
#
#   bench/strategies_90_10.sh [DURATION] [THREADS]     (defaults: 20m 8)
#   KEEP_DATA=1 bench/strategies_90_10.sh               (keep both servers' data)
#
# Records per run: op rate, mean and p99 latency (stress summary), number of
# compactions and bytes compacted (Sibyl: nodetool compactionhistory;
# Cassandra: system.compaction_history), and the keyspace's disk space every
# 30 s (disk-*.csv). Summary in bench/results/strategies-*/summary.txt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
duration="${1:-20m}"
threads="${2:-8}"
out="$here/results/strategies-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
cassandra_dir="${TMPDIR:-/tmp}/apache-cassandra"
sibyl="$root/target/release/sibyl"
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
"$root/scripts/venv.sh"   # the Python driver, for Cassandra's compaction counts
py="$root/.venv/bin/python"
need_disk 35 "$out"   # the 2026-11-23 run ended with 16 GB (Sibyl) and 10 GB (Cassandra)
[ -x "$sibyl" ] || (cd "$root" && cargo build --release -p sibyl)

strategy_map() {
  case "$1" in
    stcs) echo "{ 'class': 'SizeTieredCompactionStrategy' }" ;;
    lcs) echo "{ 'class': 'LeveledCompactionStrategy' }" ;;
    twcs) echo "{ 'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'MINUTES', 'compaction_window_size': '2' }" ;;
  esac
}

compactions() { # server port keyspace -> "count bytes_in"
  if [ "$1" = sibyl ]; then
    "$sibyl" nodetool compactionhistory | awk -v ks="$3" '$1 == ks { n++; b += $4 } END { printf "%d %.0f\n", n, b }'
  else
    "$py" - "$2" "$3" <<'PY'
import sys
from cassandra.cluster import Cluster
c = Cluster(["127.0.0.1"], port=int(sys.argv[1]))
s = c.connect()
rows = [r for r in s.execute("SELECT keyspace_name, bytes_in FROM system.compaction_history") if r.keyspace_name == sys.argv[2]]
print(len(rows), sum(r.bytes_in or 0 for r in rows))
c.shutdown()
PY
  fi
}

run() { # server port datadir strategy
  local ks="stress_$4"
  sed -e "s/stress_ts/$ks/g" -e "s/compaction = { 'class': 'SizeTieredCompactionStrategy' }/compaction = $(strategy_map "$4")/" \
    "$here/profiles/write-heavy-90-10.yaml" > "$out/$1-$4.yaml"
  ( while true; do echo "$(date +%s),$(du -sb "$3" 2>/dev/null | cut -f1)"; sleep 30; done ) > "$out/disk-$1-$4.csv" &
  local sampler=$!
  "$sibyl" stress user profile="$out/$1-$4.yaml" "ops(insert=9,simple1=1)" duration="$duration" no-warmup -rate threads="$threads" \
    -port native="$2" -graph file="$out/strategies.html" title="90/10 for $duration at $threads threads" revision="$1-$4" \
    > "$out/$1-$4.txt" 2>&1 || true
  kill $sampler 2>/dev/null || true
  sleep 5
  read -r n bytes <<< "$(compactions "$1" "$2" "$ks")"
  printf '%-9s %-4s | %s | %s | %s | compactions %s | bytes compacted %s | disk %s\n' "$1" "$4" \
    "$(grep -m1 '^Op rate' "$out/$1-$4.txt")" "$(grep -m1 '^Latency mean' "$out/$1-$4.txt")" \
    "$(grep -m1 '^Latency 99th percentile' "$out/$1-$4.txt")" "$n" "$bytes" "$(du -sh "$3" | cut -f1)" | tee -a "$out/summary.txt"
}

echo "== Sibyl"
start_sibyl "$out"
for s in stcs lcs twcs; do run sibyl 9042 "$out/sibyl-data/data/stress_$s" "$s"; done
kill $spid; wait $spid || true
drop_data "$out"

echo "== Cassandra"
"$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
"$cassandra_sh/start.sh" --port 9043 > /dev/null
for s in stcs lcs twcs; do run cassandra 9043 "$cassandra_dir/data/data/stress_$s" "$s"; done
if [ "${KEEP_DATA:-0}" = 1 ]; then
  "$cassandra_sh/stop.sh" > /dev/null 2>&1 || true
else
  "$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
fi
echo "summary: $out/summary.txt   graph: $out/strategies.html"
