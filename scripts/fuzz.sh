#!/usr/bin/env bash
# Runs the cargo-fuzz targets (frame decoder, CQL parser, internode decoder) for a while each.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 300)
# Needs the nightly toolchain; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-300}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
for t in frame_decoder cql_parser internode_decoder; do
  echo "== $t for ${secs}s"
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=4096 2>&1 | tail -5
done
