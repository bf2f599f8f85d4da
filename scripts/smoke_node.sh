#!/usr/bin/env bash
# Node.js cassandra-driver smoke test (tests/node) against a running node: scripts/smoke_node.sh HOST PORT
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
host="${1:?usage: smoke_node.sh HOST PORT}" port="${2:?usage: smoke_node.sh HOST PORT}"
npm ci --silent --no-audit --no-fund
SIBYL_HOST="$host" SIBYL_PORT="$port" node --test smoke.test.js
