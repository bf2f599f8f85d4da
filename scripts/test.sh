#!/usr/bin/env bash
# Runs every test: Rust unit and integration tests, then the Python driver and
# cqlsh tests against real `sibyl` processes. Installs what it needs itself.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building"
cargo build --bin sibyl
echo "== rust tests"
cargo test --workspace
echo "== python environment"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# the pure-Python driver installs in seconds; its Cython build takes minutes
CASS_DRIVER_NO_CYTHON=1 .venv/bin/pip install -q -r tests/python/requirements.txt
echo "== driver and cqlsh tests"
.venv/bin/python -m pytest -q tests/python "$@"
