# Shared by the bench scripts: `start_sibyl OUT` starts target/release/sibyl on
# port 9042 with its data under OUT/sibyl-data, waits for the CQL port, and
# sets `spid` to its PID.
start_sibyl() {
  local out="$1"
  cat > "$out/sibyl.yaml" <<YAML
native_transport_port: 9042
data_file_directories: [$out/sibyl-data/data]
commitlog_directory: $out/sibyl-data/commitlog
YAML
  "$sibyl" --config "$out/sibyl.yaml" > "$out/sibyl.log" 2>&1 &
  spid=$!
  until (exec 3<>/dev/tcp/127.0.0.1/9042) 2>/dev/null; do sleep 0.05; done
}

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
