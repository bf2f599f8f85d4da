#!/usr/bin/env bash
# Two builds of Sibyl, alternately, same commands: to tell a change of build
# from a change of machine. Prints op/s and the server's CPU per operation
# (utime+stime from /proc/PID/stat) for ROUNDS rounds of N writes then N
# uniform reads (memtable only unless N is large).
#
#   bench/ab_builds.sh OLD_SIBYL NEW_SIBYL [N] [ROUNDS] [THREADS]
#   e.g. git worktree add /tmp/old 2ba117b && (cd /tmp/old && cargo build --release -p sibyl)
#        bench/ab_builds.sh /tmp/old/target/release/sibyl target/release/sibyl 1000000 2 32
#
# CLIENT=latte: latte with bench/kv.rn instead (cargo install latte-cli),
# DUR (10s) of writes then of reads per build and round; N is then unused:
#   CLIENT=latte DUR=10s bench/ab_builds.sh /tmp/sibyl-old target/release/sibyl - 3 128
set -u
old="$1" new="$2" n="${3:-1000000}" rounds="${4:-2}" threads="${5:-32}"
client="${CLIENT:-stress}" dur="${DUR:-10s}"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"   # wait_node, proc_ticks
# `latte_ops JSON`: "op/s p99-ms" of a latte report
latte_ops() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); res=r["result"]; l=res["cycle_latency"]["percentiles"]; print(round(res["cycle_throughput"]["value"]), round(l[r["percentiles"].index(99.0)]["value"], 2))' "$1"
}
# `stress_p99 TEXT`: the 99th percentile of a stress summary, in ms
stress_p99() { grep -m1 '^Latency 99th percentile' "$1" | awk '{print $5}'; }
stress="$(cd "$(dirname "$0")/.." && pwd)/target/release/sibyl"
[ -x "$stress" ] || stress="$new"
tick_us=$((1000000 / $(getconf CLK_TCK)))
for round in $(seq 1 "$rounds"); do
  for build in old new; do
    bin="$old"; [ "$build" = new ] && bin="$new"
    d="$(mktemp -d)"
    printf 'native_transport_port: 9042\ndata_file_directories: [%s/data]\ncommitlog_directory: %s/commitlog\n' "$d" "$d" > "$d/s.yaml"
    "$bin" --config "$d/s.yaml" > "$d/log" 2>&1 & pid=$!
    wait_node "$pid" 9042 "$d/log" || exit 1
    if [ "$client" = latte ]; then
      # kv.rn's 100,000 rows, then $dur of writes and of reads, $threads in flight
      latte schema "$here/kv.rn" 127.0.0.1:9042 > /dev/null 2>&1
      latte load "$here/kv.rn" 127.0.0.1:9042 -P rows=100000 > /dev/null 2>&1
      c0=$(proc_ticks $pid)
      latte run "$here/kv.rn" -f write 127.0.0.1:9042 -p "$threads" -d "$dur" -P rows=100000 -o "$d/w.json" > /dev/null 2>&1
      c1=$(proc_ticks $pid)
      latte run "$here/kv.rn" -f read 127.0.0.1:9042 -p "$threads" -d "$dur" -P rows=100000 -o "$d/r.json" > /dev/null 2>&1
      c2=$(proc_ticks $pid)
      w=$(latte_ops "$d/w.json"); r=$(latte_ops "$d/r.json")
      printf '%s %-3s write %s op/s p99 %s ms, %s us CPU/op | read %s op/s p99 %s ms, %s us CPU/op\n' "$round" "$build" \
        $w "$(awk -v a=$c0 -v b=$c1 -v t=$tick_us -v n=${w%% *} -v d=${dur%s} 'BEGIN{printf "%.2f", (b-a)*t/(n*d)}')" \
        $r "$(awk -v a=$c1 -v b=$c2 -v t=$tick_us -v n=${r%% *} -v d=${dur%s} 'BEGIN{printf "%.2f", (b-a)*t/(n*d)}')"
    else
      c0=$(proc_ticks $pid)
      "$stress" stress write n="$n" no-warmup -rate threads="$threads" -pop seq=1.."$n" -col n=FIXED\(1\) size=FIXED\(100\) > "$d/w.txt"
      c1=$(proc_ticks $pid)
      "$stress" stress read n="$n" no-warmup -rate threads="$threads" -pop dist=UNIFORM\(1.."$n"\) -col n=FIXED\(1\) size=FIXED\(100\) > "$d/r.txt"
      c2=$(proc_ticks $pid)
      printf '%s %-3s write %s p99 %s ms, %s us CPU/op | read %s p99 %s ms, %s us CPU/op\n' "$round" "$build" \
        "$(grep -m1 '^Op rate' "$d/w.txt" | awk '{print $4, $5}')" "$(stress_p99 "$d/w.txt")" "$(awk -v a=$c0 -v b=$c1 -v t=$tick_us -v n=$n 'BEGIN{printf "%.2f", (b-a)*t/n}')" \
        "$(grep -m1 '^Op rate' "$d/r.txt" | awk '{print $4, $5}')" "$(stress_p99 "$d/r.txt")" "$(awk -v a=$c1 -v b=$c2 -v t=$tick_us -v n=$n 'BEGIN{printf "%.2f", (b-a)*t/n}')"
    fi
    kill $pid; wait $pid 2>/dev/null
    rm -rf "$d"
  done
done
