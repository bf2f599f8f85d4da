#!/usr/bin/env bash
# Instructions per operation of Sibyl builds, under callgrind: repeatable to
# the instruction where throughput on this VM varies by 10-15% run to run.
# For each build: the server under `valgrind --tool=callgrind` with
# instrumentation off, latte's kv.rn schema and 10,000 rows, then
# instrumentation on for exactly N latte writes, dumped, and N latte reads,
# dumped (32 in flight). Prints instructions per operation of each phase; the
# profiles stay in bench/results/callgrind-<build>-<timestamp>/ for
# `callgrind_annotate` (cg.out.1: writes, cg.out.2: reads).
#
#   N=20000 bench/callgrind_ops.sh /tmp/sibyl-old target/release/sibyl
#
# Valgrind counts `rep movsb` byte by byte: large copies weigh more than on
# the CPU. The counts rank changes; they are not cycles.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"   # wait_node
n="${N:-20000}"
for bin in "$@"; do
  d="$(mktemp -d)"
  out="$here/results/callgrind-$(basename "$bin")-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$out"
  printf 'native_transport_port: 9042\ndata_file_directories: [%s/data]\ncommitlog_directory: %s/commitlog\n' "$d" "$d" > "$d/s.yaml"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.out" \
    "$bin" --config "$d/s.yaml" > "$out/server.log" 2>&1 &
  pid=$!
  wait_node "$pid" 9042 "$out/server.log" || exit 1
  latte schema "$here/kv.rn" 127.0.0.1:9042 > /dev/null 2>&1
  latte load "$here/kv.rn" 127.0.0.1:9042 -P rows=10000 > /dev/null 2>&1
  for op in write read; do
    callgrind_control -z "$pid" > /dev/null
    callgrind_control -i on "$pid" > /dev/null
    latte run "$here/kv.rn" -f "$op" 127.0.0.1:9042 -p 32 -d "$n" -P rows=10000 -o "$out/$op.json" > /dev/null 2>&1
    callgrind_control -i off "$pid" > /dev/null
    callgrind_control -d "$op" "$pid" > /dev/null
    f="$(ls -t "$out"/cg.out.* | head -1)"
    ir="$(awk '/^totals:/ {print $2; exit}' "$f")"
    echo "$(basename "$bin") $op: $(( ir / n )) instructions/op"
  done
  kill "$pid"; wait "$pid" 2>/dev/null
  rm -rf "$d"
done
