#!/usr/bin/env bash
# Side-by-side key-value benchmark: Sibyl vs Apache Cassandra 5.0.4 on this
# machine, same load generator (latte), same workload (bench/kv.rn), same run.
#
#   bench/compare_kv.sh [DURATION] [CONCURRENCY]     (defaults: 20s, 32)
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

rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }

wait_port() { # port -> ms waited
  local start=$(date +%s%N)
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do sleep 0.01; done
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}

bench_one() { # name port
  local name="$1" port="$2"
  latte schema "$here/kv.rn" "127.0.0.1:$port" > /dev/null
  latte load "$here/kv.rn" "127.0.0.1:$port" > /dev/null
  for fn in write read; do
    latte run "$here/kv.rn" -f "$fn" "127.0.0.1:$port" --concurrency "$conc" -d "$dur" \
      -o "$out/$name-$fn.json" > "$out/$name-$fn.txt" 2>&1
  done
}

summary() { # json -> "ops p50 p99"
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
res = r.get("result", r)
def find(d, *keys):
    for k in keys:
        if isinstance(d, dict) and k in d:
            d = d[k]
        else:
            return None
    return d
ops = find(res, "cycle_throughput") or find(res, "stats", "cycle_throughput") or find(res, "throughput")
if isinstance(ops, dict):
    ops = ops.get("value", ops.get("mean"))
lat = find(res, "cycle_latency") or find(res, "request_latency") or {}
pct = lat.get("percentiles", {}) if isinstance(lat, dict) else {}
def p(q):
    v = pct.get(q) or pct.get(str(q))
    if isinstance(v, dict):
        v = v.get("value")
    return v
print(f"{ops:.0f} {p('P50') or p(50) or p('50')} {p('P99') or p(99) or p('99')}")
PY
}

echo "== Sibyl"
rm -rf "$out/sibyl-data" && mkdir -p "$out/sibyl-data"
cat > "$out/sibyl.yaml" <<YAML
native_transport_port: 9042
data_file_directories: [$out/sibyl-data/data]
commitlog_directory: $out/sibyl-data/commitlog
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
cdir="$out/cassandra"
cstart=$(date +%s%N)
cpid=$("$cassandra_sh/start.sh" --port 9043 --dir "$cdir" | tail -1)
c_start_ms=$(( $(wait_port 9043) + ($(date +%s%N) - cstart) / 1000000 - 0 ))
sleep 5
c_idle_rss=$(rss_mb $cpid)
bench_one cassandra 9043
c_load_rss=$(rss_mb $cpid)
"$cassandra_sh/stop.sh" --dir "$cdir" > /dev/null 2>&1 || kill $cpid || true

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
