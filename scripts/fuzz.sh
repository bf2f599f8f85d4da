#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while each: the native protocol frame
# decoder, the CQL parser, the internode decoder, the value deserialisers and
# JSON, commit log replay, the SSTable reader, the hints decoder, and the whole
# request path (decode, parse, prepare, execute) against a node in the process.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 300 s, all targets)
#   scripts/fuzz.sh 3600                                # an hour each, 8 hours in all
# Crashes land in fuzz/artifacts/<target>/; the corpus grows in fuzz/corpus/<target>/,
# starting from the committed seeds in fuzz/seeds/<target>/ where there are any.
# Needs the nightly toolchain; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-300}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame_decoder cql_parser internode_decoder values commitlog_replay sstable_reader hints_decoder request_path)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
for t in "${targets[@]}"; do
  echo "== $t for ${secs}s"
  dirs=("corpus/$t")
  mkdir -p "corpus/$t"
  [ -d "seeds/$t" ] && dirs+=("seeds/$t")
  opts=()
  # request_path keeps one node alive for the whole run: what it holds at
  # exit is state, not a leak
  [ "$t" = request_path ] && opts+=(-detect_leaks=0) && export ASAN_OPTIONS=detect_leaks=0
  cargo +nightly fuzz run "$t" "${dirs[@]}" -- -max_total_time="$secs" -rss_limit_mb=4096 "${opts[@]}" 2>&1 | tail -5
done
