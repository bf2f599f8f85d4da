#!/usr/bin/env bash
# Seed 000's year of topology changes, timed, for Sibyl and then for Apache
# Cassandra 5.0.4 on the same machine with the same load generator
# (`sibyl stress`, cassandra-stress's command line) (issue 17):
#
#   1. one node, loaded with N rows (`stress write`, RF 1): throughput;
#   2. node2 bootstraps from node1 holding the N rows: time (start to
#      CQL up, and "JOINING: Starting to bootstrap" to "Bootstrap
#      completed" in its system.log);
#   3. node3 bootstraps; RF 1 -> 3; `nodetool repair -full` on each node:
#      times; the same stress run at QUORUM: throughput on 3 nodes;
#   4. hints off, node3 stopped, N/10 new rows written at QUORUM (node3
#      misses 10% of the writes), node3 started, `nodetool repair -full` on
#      node3: time and bytes streamed to it;
#   5. node4 bootstraps; `nodetool cleanup` on nodes 1-3: times; the same
#      stress run at QUORUM on 4 nodes: throughput.
#
#   bench/topology_growth.sh [N]        (default 200000 rows of ~300 B)
#   SERVERS=sibyl bench/topology_growth.sh   (one of them only)
#
# Every node runs on this one machine (127.0.0.1-4), so more nodes share the
# same two cores: the 3- and 4-node figures show the cost of RF 3, not
# scaling. Needs `cargo build --release --bin sibyl` and ../shared/cassandra/.
# Results in bench/results/growth-<timestamp>/summary.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
n="${1:-200000}"
tenth=$(( n / 10 ))
out="$here/results/growth-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
sibyl="$root/target/release/sibyl"
py="$root/.venv/bin/python"
threads="${THREADS:-32}"

now() { date +%s.%N; }
since() { python3 -c "print(f'{$(now) - $1:.1f}')"; }

# stress LABEL NODE CL FIRST LAST: `sibyl stress write` of keys FIRST..LAST;
# prints "ops/s p99"
stress() {
  "$sibyl" stress write "n=$(( $5 - $4 + 1 ))" no-warmup "cl=$3" -rate "threads=$threads" \
    -pop "seq=$4..$5" -schema "replication(factor=1)" -node "$2" -port native=9042 > "$out/$1.txt" 2>&1
  python3 - "$out/$1.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
assert re.search(r"Total errors\s+:\s+0 ", t), t[-2000:]
ops = re.search(r"Op rate\s+: ([\d,]+) op/s", t).group(1).replace(",", "")
p99 = re.search(r"Latency 99th percentile\s+:\s+([\d.]+) ms", t).group(1)
print(ops, p99)
PY
}

# cql HOST STATEMENT: one statement through the Python driver at QUORUM
cql() {
  "$py" - "$1" "$2" <<'PY'
import sys
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement
c = Cluster([sys.argv[1]], port=9042, protocol_version=5)
s = c.connect()
for r in s.execute(SimpleStatement(sys.argv[2], consistency_level=ConsistencyLevel.QUORUM), timeout=60):
    print(*r)
c.shutdown()
PY
}

# boot_secs LOG: seconds from "JOINING: Starting to bootstrap" to
# "Bootstrap completed" in a system.log (both servers write these lines)
boot_secs() {
  python3 - "$1" <<'PY'
import re, sys, datetime
t = open(sys.argv[1]).read()
def at(pat):
    m = re.search(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{3}).*" + pat, t)
    return datetime.datetime.strptime(m.group(1).replace("T", " ").replace(",", "."), "%Y-%m-%d %H:%M:%S.%f")
print(f"{(at('Bootstrap completed') - at('JOINING: Starting to bootstrap')).total_seconds():.1f}")
PY
}

declare -A r

servers="${SERVERS:-sibyl cassandra}"
for k in 1 3 4 boot2 boot3 boot4 repair missed cleanup; do r[sibyl,$k]="-"; r[cassandra,$k]="-"; done

# ---------------------------------------------------------------- Sibyl
if [[ " $servers " == *" sibyl "* ]]; then
echo "== Sibyl"
s="$out/sibyl"
"$sibyl" cluster create --dir "$s" --nodes 4 -- stream_throughput_outbound=0 > /dev/null
st() { "$sibyl" cluster "$@" --dir "$s" > /dev/null 2>&1; }
nt() { local node="$1"; shift; "$sibyl" nodetool -h "127.0.0.$node" -p 7199 "$@"; }
st start node1
r[sibyl,1]=$(stress sibyl-1node 127.0.0.1 ONE 1 "$n")
t=$(now); st start node2; r[sibyl,boot2]="$(since "$t") s ($(boot_secs "$s/node2/data/logs/system.log") s streaming)"
t=$(now); st start node3; r[sibyl,boot3]="$(since "$t") s"
cql 127.0.0.1 "ALTER KEYSPACE keyspace1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
rep=""
for k in 1 2 3; do t=$(now); nt "$k" repair -full keyspace1 > "$out/sibyl-repair$k.txt"; rep="$rep $(since "$t")"; done
r[sibyl,repair]="$rep"
r[sibyl,3]=$(stress sibyl-3node 127.0.0.1 QUORUM 1 "$n")
for k in 1 2 3; do nt "$k" disablehandoff; done
st stop node3
sleep 2
stress sibyl-missed 127.0.0.1 QUORUM $(( n + 1 )) $(( n + tenth )) > /dev/null
st start node3
t=$(now); nt 3 repair -full keyspace1 > "$out/sibyl-repair-missed.txt"; took=$(since "$t")
bytes=$(grep -o '[0-9]* bytes streamed' "$out/sibyl-repair-missed.txt" | awk '{s+=$1} END {print s+0}')
r[sibyl,missed]="$took s, $bytes bytes"
for k in 1 2 3; do nt "$k" enablehandoff; done
t=$(now); st start node4; r[sibyl,boot4]="$(since "$t") s"
cl=""
for k in 1 2 3; do t=$(now); nt "$k" cleanup keyspace1 > /dev/null; cl="$cl $(since "$t")"; done
r[sibyl,cleanup]="$cl"
r[sibyl,4]=$(stress sibyl-4node 127.0.0.1 QUORUM 1 "$n")
"$sibyl" cluster stop --dir "$s" > /dev/null 2>&1
rm -rf "$s"/node*/data
fi

# ------------------------------------------------------------ Cassandra
if [[ " $servers " == *" cassandra "* ]]; then
echo "== Cassandra 5.0.4"
c="$out/cassandra"
cstart() { "$cassandra_sh/start.sh" --dir "$c$1" --address "127.0.0.$1" --seeds 127.0.0.1 --heap 1G --port 9042 > /dev/null; }
cnt() { local node="$1"; shift; "$cassandra_sh/nodetool.sh" --dir "$c$node" "$@"; }
cstart 1
r[cassandra,1]=$(stress cassandra-1node 127.0.0.1 ONE 1 "$n")
t=$(now); cstart 2; r[cassandra,boot2]="$(since "$t") s ($(boot_secs "${c}2/logs/system.log") s streaming)"
t=$(now); cstart 3; r[cassandra,boot3]="$(since "$t") s"
cql 127.0.0.1 "ALTER KEYSPACE keyspace1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
rep=""
for k in 1 2 3; do t=$(now); cnt "$k" repair -full keyspace1 > "$out/cassandra-repair$k.txt" 2>&1; rep="$rep $(since "$t")"; done
r[cassandra,repair]="$rep"
r[cassandra,3]=$(stress cassandra-3node 127.0.0.1 QUORUM 1 "$n")
for k in 1 2 3; do cnt "$k" disablehandoff; done
"$cassandra_sh/stop.sh" --dir "${c}3" > /dev/null 2>&1
sleep 2
stress cassandra-missed 127.0.0.1 QUORUM $(( n + 1 )) $(( n + tenth )) > /dev/null
cstart 3
t=$(now); cnt 3 repair -full keyspace1 > "$out/cassandra-repair-missed.txt" 2>&1; took=$(since "$t")
# (bytes_to_receive, the sessions' prepared sizes: 5.0.4's bytes_received
# adds cumulative progress up, many times the truth)
bytes=$(cql 127.0.0.3 "SELECT operation, bytes_to_receive FROM system_views.streaming" 2>/dev/null \
  | awk '$1 == "Repair" {s += $2} END {printf "%d", s}' || echo "?")
r[cassandra,missed]="$took s, $bytes bytes"
for k in 1 2 3; do cnt "$k" enablehandoff; done
t=$(now); cstart 4; r[cassandra,boot4]="$(since "$t") s"
cl=""
for k in 1 2 3; do t=$(now); cnt "$k" cleanup keyspace1 > /dev/null 2>&1; cl="$cl $(since "$t")"; done
r[cassandra,cleanup]="$cl"
r[cassandra,4]=$(stress cassandra-4node 127.0.0.1 QUORUM 1 "$n")
for k in 1 2 3 4; do "$cassandra_sh/stop.sh" --dir "$c$k" > /dev/null 2>&1 || true; done
rm -rf "$c"*/data "$c"*/lib
fi

{
  echo "N = $n rows (sibyl stress write, $threads threads), $(date -u +%Y-%m-%d)"
  echo
  echo "| step | Sibyl | Cassandra 5.0.4 |"
  echo "|---|---|---|"
  echo "| 1 node, RF 1, ONE: ops/s p99 ms | ${r[sibyl,1]} | ${r[cassandra,1]} |"
  echo "| node2 bootstraps from node1 holding N rows | ${r[sibyl,boot2]} | ${r[cassandra,boot2]} |"
  echo "| node3 bootstraps | ${r[sibyl,boot3]} | ${r[cassandra,boot3]} |"
  echo "| RF 1 -> 3, repair -full on nodes 1, 2, 3 (s) |${r[sibyl,repair]} |${r[cassandra,repair]} |"
  echo "| 3 nodes, RF 3, QUORUM: ops/s p99 ms | ${r[sibyl,3]} | ${r[cassandra,3]} |"
  echo "| repair of node3 after it missed N/10 writes | ${r[sibyl,missed]} | ${r[cassandra,missed]} |"
  echo "| node4 bootstraps | ${r[sibyl,boot4]} | ${r[cassandra,boot4]} |"
  echo "| cleanup on nodes 1, 2, 3 (s) |${r[sibyl,cleanup]} |${r[cassandra,cleanup]} |"
  echo "| 4 nodes, RF 3, QUORUM: ops/s p99 ms | ${r[sibyl,4]} | ${r[cassandra,4]} |"
} | tee "$out/summary.md"
