#!/usr/bin/env bash
# gocql smoke test (tests/go) against a running node: scripts/smoke_go.sh HOST PORT
set -euo pipefail
cd "$(dirname "$0")/../tests/go"
host="${1:?usage: smoke_go.sh HOST PORT}" port="${2:?usage: smoke_go.sh HOST PORT}"
go mod download
SIBYL_HOST="$host" SIBYL_PORT="$port" go test -count=1 -v ./...
