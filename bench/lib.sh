# Shared by the bench scripts: `start_sibyl OUT` starts target/release/sibyl on
# port 9042 with its data under OUT/sibyl-data, waits for the CQL port, and
# sets `spid` to its PID. SIBYL_YAML is appended to its configuration
# (`SIBYL_YAML='memtable_heap_space: 4GiB'`).
start_sibyl() {
  local out="$1"
  cat > "$out/sibyl.yaml" <<YAML
native_transport_port: 9042
data_file_directories: [$out/sibyl-data/data]
commitlog_directory: $out/sibyl-data/commitlog
${SIBYL_YAML:-}
YAML
  "$sibyl" --config "$out/sibyl.yaml" > "$out/sibyl.log" 2>&1 &
  spid=$!
  wait_node "$spid" 9042 "$out/sibyl.log"
}

# `wait_node PID PORT LOG`: waits until the node PID accepts on PORT; a node
# that exits first (its port still held by the last run's, a bad config)
# ends the benchmark with the end of its LOG, not a wait for ever.
wait_node() {
  until (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; do
    if ! kill -0 "$1" 2>/dev/null; then
      echo "the node exited before accepting on port $2; the end of $3:" >&2
      tail -5 "$3" >&2
      return 1
    fi
    sleep 0.05
  done
}

# `need_disk GB OUT`: stops a benchmark before it starts when the file system
# of OUT has less than GB gigabytes free (a full disk ends a long run midway,
# as it ended one on 2026-11-27 fifteen minutes in).
need_disk() {
  local free
  free=$(df -P -BG "$2" | awk 'NR==2 {gsub("G", "", $4); print $4}')
  if [ "$free" -lt "$1" ]; then
    echo "only $free GB free under $2; this benchmark needs about $1 GB" \
      "(old runs' data: bench/results/*/sibyl-data; build output: target/)" >&2
    exit 1
  fi
}

# `drop_data OUT`: removes a run's data once measured (its figures stay),
# unless KEEP_DATA=1.
drop_data() { [ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$1/sibyl-data"; }

# `summary JSON` prints "ops/s p50 p99" of a latte report.
summary() { # json -> "ops p50 p99"
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
res = r["result"]
pcts = r["percentiles"]
lat = res["cycle_latency"]["percentiles"]
p = lambda q: lat[pcts.index(q)]["value"]
print(f"{res['cycle_throughput']['value']:.0f} {p(50.0):.3f} {p(99.0):.3f}")
PY
}

# `proc_ticks PID`: the CPU ticks (user + system) a process has used.
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# `machine_ticks`: "busy total steal" ticks of the whole machine. Steal is
# time the hypervisor gave this VM's vCPUs to another guest while they had
# work: counted busy, and charged to no process here (a process's ticks
# leave it out), but a run with much of it ran on a contended host.
machine_ticks() { awk '/^cpu / {t=0; for (i=2;i<=NF;i++) t+=$i; print t-$5-$6, t, $9}' /proc/stat; }

# `rss_mb PID`: the process's resident memory in MB.
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }

# `wait_port PORT` waits until 127.0.0.1:PORT accepts and prints the ms waited.
wait_port() {
  local start=$(date +%s%N)
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do sleep 0.01; done
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}

# `latte_kv NAME PORT`: kv.rn's schema, ROWS rows (100,000), then `write` and
# `read` for $dur at $conc in flight; latte's reports in $out/NAME-{write,read}.
latte_kv() {
  local name="$1" port="$2"
  latte schema "$here/kv.rn" "127.0.0.1:$port" > /dev/null
  latte load "$here/kv.rn" "127.0.0.1:$port" -P rows="${ROWS:-100000}" > /dev/null
  for fn in write read; do
    latte run "$here/kv.rn" -f "$fn" "127.0.0.1:$port" -p "$conc" -d "$dur" -P rows="${ROWS:-100000}" \
      -o "$out/$name-$fn.json" > "$out/$name-$fn.txt" 2>&1
  done
}
