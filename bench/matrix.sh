#!/usr/bin/env bash
# The performance matrix (issue 19): Sibyl and Apache Cassandra 5.0.4 on this
# machine, in one run, under the same clients:
#   latte (bench/kv.rn): write, read and a 90/10 read/write mix,
#   sibyl stress: write, read and mixed ratio(write=1,read=9),
# each at 32, 128 and 512 requests in flight. For every point: ops/s,
# p50/p99/p999, the server's CPU per operation (from /proc/PID/stat), the
# client's CPU per operation, the cores the server and the whole machine
# used, the machine's idle share, and how much of its busy time the
# hypervisor gave to other guests (steal), from /proc/stat.
#
#   bench/matrix.sh [DURATION] [IN_FLIGHT...]     (defaults: 15s, 32 128 512)
#   SERVERS="sibyl" bench/matrix.sh 10s 128       (Sibyl alone)
#   CLIENTS="latte" bench/matrix.sh               (latte alone)
#   WARMUP=60s bench/matrix.sh                    (unmeasured mixed load first; default 30s)
#   LATTE_THREADS=2 bench/matrix.sh               (latte on two threads, the same in flight)
#   INTERLEAVE=0 bench/matrix.sh                  (each server's points in one block, as
#                                                  before 2026-12-06: by default both run
#                                                  at once, the idle one paused, and the
#                                                  points alternate between them)
#   LATTE_PROCS=2 bench/matrix.sh                 (two latte processes, each with half the
#                                                  in flight on its own connection: their
#                                                  throughputs added, their histograms merged)
#
# Needs: `cargo build --release --bin sibyl`, `cargo install latte-cli`, and
# ../shared/cassandra/start.sh for Cassandra. Results in
# bench/results/matrix-<timestamp>/: latte's JSON, stress's text and
# HdrHistogram log (its percentiles to the microsecond), and
# summary.md (one row per point, ratios only within this run).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
dur="${1:-15s}"
shift || true
points="${*:-32 128 512}"
servers="${SERVERS:-sibyl cassandra}"
clients="${CLIENTS:-latte stress}"
rows="${ROWS:-100000}"
warmup="${WARMUP:-30s}"   # before the measured points of each server; 0: none
# with both servers: the two up at once, the one not measured paused, the
# points alternating between them (INTERLEAVE=0: Sibyl's points, then
# Cassandra's)
interleave="${INTERLEAVE:-1}"
[[ "$servers" == *" "* ]] || interleave=0
# latte's worker threads; each keeps IN_FLIGHT / LATTE_THREADS requests in
# flight, so a point has the same requests in flight whatever the threads
lthreads="${LATTE_THREADS:-1}"
# latte processes run side by side (one thread each unless LATTE_THREADS):
# latte's threads share one runtime and cost more an operation than one
# (bench/README.md, 2026-12-05); processes share nothing
lprocs="${LATTE_PROCS:-1}"
out="$here/results/matrix-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cassandra_sh="${CASSANDRA_SH:-$root/../shared/cassandra}"
sibyl="$root/target/release/sibyl"
. "$here/lib.sh"   # start_sibyl, proc_ticks, machine_ticks
pkill -f "target/release/sibyl" 2>/dev/null || true
tck=$(getconf CLK_TCK)
ncpu=$(nproc)


# `measure SERVER CLIENT OP INFLIGHT CMD...`: runs CMD, and appends a line of
# raw figures to $out/raw.tsv: the server's ticks, the client's CPU seconds
# (from /usr/bin/time), the machine's busy and total ticks, the wall time.
measure() {
  local server="$1" client="$2" op="$3" n="$4"; shift 4
  local name="$server-$client-$op-$n"
  local s0 m0 m1 t0 t1
  s0=$(proc_ticks "$pid"); read -r mb0 mt0 ms0 < <(machine_ticks); t0=$(date +%s%N)
  /usr/bin/time -f "%U %S" -o "$out/$name.time" "$@" > "$out/$name.txt" 2>&1 || echo "   ($name failed: see $out/$name.txt)"
  t1=$(date +%s%N); read -r mb1 mt1 ms1 < <(machine_ticks)
  local sticks=$(( $(proc_ticks "$pid") - s0 ))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$client" "$op" "$n" "$sticks" \
    "$(tail -1 "$out/$name.time")" "$((mb1 - mb0))" "$((mt1 - mt0))" "$(( (t1 - t0) / 1000000 ))" \
    "$((ms1 - ms0))" >> "$out/raw.tsv"
  echo "   $name done"
}

# `prepare SERVER PORT`: the schema, the rows, and an unmeasured warm-up
# (Cassandra's JIT compiles its hot paths in the first tens of seconds;
# without it its first points measure the interpreter)
prepare() {
  local server="$1" port="$2"
  if [[ " $clients " == *" latte "* ]]; then
    latte schema "$here/kv.rn" "127.0.0.1:$port" > /dev/null
    latte load "$here/kv.rn" "127.0.0.1:$port" -P rows="$rows" > /dev/null 2>&1
    [ "$warmup" = 0 ] || latte run "$here/kv.rn" -f "read:0.9,write:0.1" "127.0.0.1:$port" -p 128 \
      -d "$warmup" -P rows="$rows" -o "$out/$server-warmup.json" > /dev/null 2>&1
  fi
  if [[ " $clients " == *" stress "* ]]; then
    "$sibyl" stress write n="$rows" no-warmup -rate threads=64 -pop seq=1.."$rows" -port native="$port" > /dev/null
  fi
}

# `point SERVER PORT CLIENT OP N`: one measured point
point() {
  local server="$1" port="$2" client="$3" op="$4" n="$5"
  if [ "$client" = latte ]; then
    local f="$op"; [ "$op" = mix ] && f="read:0.9,write:0.1"
    local args=(run "$here/kv.rn" -f "$f" "127.0.0.1:$port" -t "$lthreads"
      -p "$(( n / lthreads / lprocs ))" -d "$dur" -P rows="$rows")
    if [ "$lprocs" = 1 ]; then
      measure "$server" latte "$op" "$n" latte "${args[@]}" -o "$out/$server-latte-$op-$n.json"
    else
      # /usr/bin/time counts the processes' CPU too (the shell waits for them)
      # shellcheck disable=SC2016 # expanded by the inner shell
      measure "$server" latte "$op" "$n" bash -c \
        'o=$1; p=$2; shift 2; for k in $(seq "$p"); do latte "$@" -o "$o.$k.json" & done; wait' \
        _ "$out/$server-latte-$op-$n" "$lprocs" "${args[@]}"
    fi
  else
    local cmd="$op"; [ "$op" = mix ] && cmd="mixed ratio(write=1,read=9)"
    # shellcheck disable=SC2086
    measure "$server" stress "$op" "$n" "$sibyl" stress $cmd duration="$dur" no-warmup \
      -rate threads="$n" -pop "dist=uniform(1..$rows)" -port native="$port" \
      -log hdrfile="$out/$server-stress-$op-$n.hdr"
  fi
}

declare -A pids ports
start_server() { # server: sets pids[server] and ports[server]
  case "$1" in
    sibyl)
      start_sibyl "$out"
      pids[sibyl]=$spid ports[sibyl]=9042
      ;;
    cassandra)
      "$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true
      pids[cassandra]=$("$cassandra_sh/start.sh" --port 9043 | tail -1)
      ports[cassandra]=9043
      until (exec 3<>/dev/tcp/127.0.0.1/9043) 2>/dev/null; do sleep 0.1; done
      sleep 5
      ;;
  esac
}
stop_server() {
  case "$1" in
    sibyl) kill -CONT "${pids[sibyl]}"; kill "${pids[sibyl]}"; wait "${pids[sibyl]}" || true; rm -rf "$out/sibyl-data" ;;
    cassandra) kill -CONT "${pids[cassandra]}" 2>/dev/null || true; "$cassandra_sh/stop.sh" --wipe > /dev/null 2>&1 || true ;;
  esac
}
# `only SERVER`: the other servers paused (SIGSTOP), this one running
only() {
  local s
  for s in $servers; do
    [ "$s" = "$1" ] || [ -z "${pids[$s]:-}" ] || kill -STOP "${pids[$s]}"
  done
  kill -CONT "${pids[$1]}"
  pid=${pids[$1]}
  sleep 1
}

if [ "$interleave" = 1 ]; then
  # both servers up, each paused while the other is measured, and the
  # points alternate between them: a ratio compares two measurements a few
  # seconds apart, not two halves of a run the machine's speed drifted
  # between (on 2026-12-05 the same build's writes at 128 in flight went
  # from 280k to 210k/s within half an hour)
  for server in $servers; do
    echo "== $server"
    start_server "$server"
    only "$server"
    prepare "$server" "${ports[$server]}"
  done
  for client in $clients; do
    for n in $points; do
      for op in write read mix; do
        for server in $servers; do
          only "$server"
          point "$server" "${ports[$server]}" "$client" "$op" "$n"
        done
      done
    done
  done
  for server in $servers; do stop_server "$server"; done
else
  for server in $servers; do
    echo "== $server"
    start_server "$server"
    pid=${pids[$server]}
    prepare "$server" "${ports[$server]}"
    for client in $clients; do
      for n in $points; do
        for op in write read mix; do
          point "$server" "${ports[$server]}" "$client" "$op" "$n"
        done
      done
    done
    stop_server "$server"
  done
fi

python3 - "$out" "$tck" "$ncpu" "$here" <<'PY' | tee "$out/summary.md"
import glob, json, re, sys, os
out, tck, ncpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
import hdrlog
rows = []
for line in open(f"{out}/raw.tsv"):
    fields = line.rstrip("\n").split("\t")
    # the stolen ticks came as a tenth field on 2026-12-03
    server, client, op, n, sticks, ctime, mbusy, mtotal, wall_ms = fields[:9]
    msteal = fields[9] if len(fields) > 9 else "0"
    name = f"{server}-{client}-{op}-{n}"
    try:
        if client == "latte":
            # one report, or one per process (LATTE_PROCS): throughputs add
            # up, and the percentiles are those of their latency histograms
            # (nanoseconds) merged, for one report the ones latte prints
            paths = glob.glob(f"{out}/{name}.json") or sorted(glob.glob(f"{out}/{name}.*.json"))
            if not paths:
                raise FileNotFoundError(f"{name}.json")
            parts = [json.load(open(path))["result"] for path in paths]
            ops = sum(res["cycle_count"] for res in parts)
            rate = sum(res["cycle_throughput"]["value"] for res in parts)
            errors = sum(res["error_count"] for res in parts)
            h = hdrlog.Merged()
            for res in parts:
                h.add(*hdrlog.decode(res["cycle_latency"]["histogram"]))
            p50, p99, p999 = (h.value_at_quantile(q) / 1e6 for q in (0.5, 0.99, 0.999))
        else:
            text = open(f"{out}/{name}.txt").read()
            num = lambda label: float(re.search(label + r"\s*:\s*([\d,.]+)", text).group(1).replace(",", ""))
            rate, ops = num("Op rate"), num("Total partitions")
            p50, p99, p999 = num("Latency median"), num(r"Latency 99th percentile"), num(r"Latency 99\.9th percentile")
            if os.path.exists(f"{out}/{name}.hdr"):
                # the summary rounds to 0.1 ms (as cassandra-stress); the
                # run's HdrHistogram log has them to the microsecond
                h = hdrlog.read(f"{out}/{name}.hdr")
                p50, p99, p999 = (h.value_at_quantile(q) / 1000 for q in (0.5, 0.99, 0.999))
            errors = int(num("Total errors"))
    except Exception as e:  # a failed point shows as such, the rest stands
        rows.append((server, client, op, int(n), None, str(e)))
        continue
    user, system = (float(x) for x in ctime.split())
    wall = int(wall_ms) / 1000
    server_us = int(sticks) / tck * 1e6 / ops
    client_us = (user + system) * 1e6 / ops
    busy = int(mbusy) / int(mtotal) * ncpu if int(mtotal) else 0
    rows.append((server, client, op, int(n), dict(
        rate=rate, p50=p50, p99=p99, p999=p999, server_us=server_us, client_us=client_us,
        server_cores=int(sticks) / tck / wall, busy=busy, idle=1 - busy / ncpu, errors=errors,
        stolen=int(msteal) / int(mtotal) * ncpu if int(mtotal) else 0), None))

print("| client | op | in flight | server | ops/s | p50 ms | p99 ms | p99.9 ms | server µs/op | client µs/op | server cores | machine busy cores | of which stolen | idle share | errors |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
order = {"write": 0, "read": 1, "mix": 2}
for server, client, op, n, f, err in sorted(rows, key=lambda r: (r[1], order[r[2]], r[3], r[0])):
    if f is None:
        print(f"| {client} | {op} | {n} | {server} | failed: {err} ||||||||||")
        continue
    print(f"| {client} | {op} | {n} | {server} | {f['rate']:.0f} | {f['p50']:.2f} | {f['p99']:.2f} | {f['p999']:.2f} | "
          f"{f['server_us']:.1f} | {f['client_us']:.1f} | {f['server_cores']:.2f} | {f['busy']:.2f} | {f['stolen']:.2f} | {f['idle']:.0%} | {f['errors']} |")

# Sibyl against Cassandra, point by point, and against Cassandra's best
by = {(s, c, o, n): f for s, c, o, n, f, _ in rows if f}
best = {}
for (s, c, o, n), f in by.items():
    if s == "cassandra":
        best[(c, o)] = max(best.get((c, o), 0), f["rate"])
lines = []
for (s, c, o, n), f in sorted(by.items(), key=lambda kv: (kv[0][1], order[kv[0][2]], kv[0][3])):
    cas = by.get(("cassandra", c, o, n))
    if s != "sibyl" or not cas:
        continue
    lines.append(f"| {c} | {o} | {n} | {f['rate'] / cas['rate']:.1f}x | {f['rate'] / best[(c, o)]:.1f}x | "
                 f"{cas['server_us'] / f['server_us']:.1f}x | {cas['p99'] / f['p99']:.1f}x |")
if lines:
    print()
    print("| client | op | in flight | throughput vs Cassandra | vs Cassandra's best | Cassandra's CPU/op ÷ Sibyl's | Cassandra's p99 ÷ Sibyl's |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
PY
echo "results: $out"
