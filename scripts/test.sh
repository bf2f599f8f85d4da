#!/usr/bin/env bash
# Runs every test: builds the node, runs the Rust tests, then the Python driver
# and cqlsh tests (tests/python) against a real `sibyl` process. Installs what
# it needs itself (.venv with the pinned packages of tests/python/requirements.txt).
#
#   scripts/test.sh [pytest args...]
#   SIBYL_TARGET=127.0.0.1:9043 .venv/bin/pytest -q tests/python   # the same tests against another server
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== python environment"
scripts/venv.sh

echo "== a headless browser for the web page tests (best effort: they skip without one)"
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || echo "chromium not installed"
fi

echo "== Prometheus, which scrapes the nodes in test_metrics.py (required: that test fails without it)"
if ! command -v prometheus >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1; } \
    || echo "prometheus not installed"
fi

echo "== house rules: formatting and lints"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

echo "== building"
cargo build --bin sibyl

echo "== rust tests"
cargo test --workspace

echo "== driver and cqlsh tests"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/python "$@"
