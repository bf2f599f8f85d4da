#!/usr/bin/env bash
# Incremental against full repair (issue 17), for Sibyl and then for Apache
# Cassandra 5.0.4 on the same machine, with the same load generator
# (`sibyl stress`, cassandra-stress's command line):
#
#   1. three nodes, RF 3, N rows written at ALL;
#   2. `nodetool repair keyspace1` (incremental) on node1: everything is
#      compared and marked repaired;
#   3. hints off, node3 stopped, N/10 new rows written at QUORUM, node3
#      started, `nodetool repair keyspace1` (incremental) on node3: time;
#   4. the same again (another N/10 missed), repaired with `repair -full`:
#      time. Both repairs restore the same number of rows; the incremental
#      one compares only what was written since the last one.
#
#   bench/incremental_repair.sh [N]        (default 200000 rows of ~300 B)
#   SERVERS=sibyl bench/incremental_repair.sh
#
# Needs `cargo build --release --bin sibyl` and ../shared/cassandra/.
# Results in bench/results/increpair-<timestamp>/summary.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
n="${1:-200000}"
tenth=$(( n / 10 ))
out="$here/results/increpair-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
sibyl="$root/target/release/sibyl"
threads="${THREADS:-32}"
servers="${SERVERS:-sibyl cassandra}"

now() { date +%s.%N; }
since() { python3 -c "print(f'{$(now) - $1:.1f}')"; }

# write LABEL CL FIRST LAST: `sibyl stress write` of keys FIRST..LAST at RF 3
write() {
  "$sibyl" stress write "n=$(( $4 - $3 + 1 ))" no-warmup "cl=$2" -rate "threads=$threads" \
    -pop "seq=$3..$4" -schema "replication(factor=3)" -node 127.0.0.1 -port native=9042 > "$out/$1.txt" 2>&1
  grep -q "Total errors *: *0 " "$out/$1.txt" || { tail -20 "$out/$1.txt"; exit 1; }
}

declare -A r
for k in first inc full; do r[sibyl,$k]="-"; r[cassandra,$k]="-"; done

# run SERVER START STOP NT: the steps, with START/STOP NODE and NT NODE ARGS
run() {
  local srv="$1" start="$2" stop="$3" nt="$4"
  for k in 1 2 3; do $start "$k"; done
  write "$srv-load" ALL 1 "$n"
  local t
  t=$(now); $nt 1 repair keyspace1 > "$out/$srv-repair-first.txt" 2>&1; r[$srv,first]="$(since "$t") s"
  for k in 1 2 3; do $nt "$k" disablehandoff; done
  local from=$(( n + 1 )) mode
  for mode in inc full; do
    $stop 3
    sleep 2
    write "$srv-missed-$mode" QUORUM "$from" $(( from + tenth - 1 ))
    from=$(( from + tenth ))
    $start 3
    sleep 5
    if [ "$mode" = inc ]; then
      t=$(now); $nt 3 repair keyspace1 > "$out/$srv-repair-$mode.txt" 2>&1
    else
      t=$(now); $nt 3 repair -full keyspace1 > "$out/$srv-repair-$mode.txt" 2>&1
    fi
    r[$srv,$mode]="$(since "$t") s"
    grep -q "Repair completed successfully" "$out/$srv-repair-$mode.txt" \
      || { tail -5 "$out/$srv-repair-$mode.txt"; exit 1; }
  done
}

if [[ " $servers " == *" sibyl "* ]]; then
  echo "== Sibyl"
  s="$out/sibyl"
  "$sibyl" cluster create --dir "$s" --nodes 3 -- stream_throughput_outbound=0 > /dev/null
  sstart() { "$sibyl" cluster start node"$1" --dir "$s" > /dev/null 2>&1; }
  sstop() { "$sibyl" cluster stop node"$1" --dir "$s" > /dev/null 2>&1; }
  snt() { local node="$1"; shift; "$sibyl" nodetool -h "127.0.0.$node" -p 7199 "$@"; }
  run sibyl sstart sstop snt
  "$sibyl" cluster stop --dir "$s" > /dev/null 2>&1
  rm -rf "$s"/node*/data
fi

if [[ " $servers " == *" cassandra "* ]]; then
  echo "== Cassandra 5.0.4"
  c="$out/cassandra"
  cstart() { "$cassandra_sh/start.sh" --dir "$c$1" --address "127.0.0.$1" --seeds 127.0.0.1 --heap 1G --port 9042 > /dev/null; }
  cstop() { "$cassandra_sh/stop.sh" --dir "$c$1" > /dev/null 2>&1; }
  cnt() { local node="$1"; shift; "$cassandra_sh/nodetool.sh" --dir "$c$node" "$@"; }
  run cassandra cstart cstop cnt
  for k in 1 2 3; do cstop "$k" || true; done
  rm -rf "$c"*/data "$c"*/lib
fi

{
  echo "N = $n rows (sibyl stress write, $threads threads), $(date -u +%Y-%m-%d)"
  echo
  echo "| step | Sibyl | Cassandra 5.0.4 |"
  echo "|---|---|---|"
  echo "| first incremental repair of N rows (node1) | ${r[sibyl,first]} | ${r[cassandra,first]} |"
  echo "| node3 missed N/10: incremental repair (node3) | ${r[sibyl,inc]} | ${r[cassandra,inc]} |"
  echo "| node3 missed another N/10: repair -full (node3) | ${r[sibyl,full]} | ${r[cassandra,full]} |"
} | tee "$out/summary.md"
