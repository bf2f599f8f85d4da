#!/usr/bin/env bash
# Makes .venv (once) with the pinned packages of tests/python/requirements.txt
# (again whenever that file changes): what the Python tests and the bench
# scripts that talk CQL from Python (bench/strategies_90_10.sh) run in.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
req=tests/python/requirements.txt
stamp=.venv/.requirements.sha256
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  # cassandra-driver ships manylinux wheels; if pip ever falls back to the sdist, skip its minutes-long Cython build
  CASS_DRIVER_NO_CYTHON=1 .venv/bin/pip install -q -r "$req"
  echo "$want" > "$stamp"
fi
