#!/usr/bin/env bash
# Java driver 4.x smoke test (tests/java, Maven) against a running node: scripts/smoke_java.sh HOST PORT
set -euo pipefail
cd "$(dirname "$0")/../tests/java"
host="${1:?usage: smoke_java.sh HOST PORT}" port="${2:?usage: smoke_java.sh HOST PORT}"
SIBYL_HOST="$host" SIBYL_PORT="$port" mvn -q -B -Dstyle.color=never compile exec:java
