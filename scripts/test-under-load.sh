#!/usr/bin/env bash
# The tests on a loaded machine, as CI runs them on two shared cores: BUSY (default 2) busy loops run beside
# `swift test` with the arguments given, and are stopped by their PIDs when it ends; its status is the script's.
# Live tests await states they can observe (a metric, a log line, an answer), not fixed sleeps: one that fails here
# and passes on an idle machine has a race (README, "Run the tests").
# Usage: scripts/test-under-load.sh [swift test arguments]     e.g. BUSY=3 scripts/test-under-load.sh --filter Live
set -uo pipefail
cd "$(dirname "$0")/.."
busy=()
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
for _ in $(seq 1 "${BUSY:-2}"); do
    (while :; do :; done) &
    busy+=($!)
done
swift test "$@"
