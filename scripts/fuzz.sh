#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while each: the native protocol frame
# decoder, the CQL parser, the internode decoder, the value deserialisers and
# JSON, commit log replay, the SSTable reader and the hints decoder.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 300 s, all targets)
#   scripts/fuzz.sh 3600                                # an hour each, 7 hours in all
# Crashes land in fuzz/artifacts/<target>/; the corpus grows in fuzz/corpus/<target>/.
# Needs the nightly toolchain; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-300}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame_decoder cql_parser internode_decoder values commitlog_replay sstable_reader hints_decoder)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
for t in "${targets[@]}"; do
  echo "== $t for ${secs}s"
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=4096 2>&1 | tail -5
done
