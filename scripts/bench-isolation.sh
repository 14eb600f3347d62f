#!/usr/bin/env bash
# Collections that never stall each other (README, "Benchmarks"; every run in docs/benchmarks.md): for each server
# binary given, alternating,
# ROUNDS times: 4 clients upserting into a small collection B alone and while a collection A of ITEMS items is
# replaced back to back, and reads of the list and of an item of A, A idle and replaced (`Load isolation`), then
# 64 clients on one collection and spread over 64 (`Load writes`), all with `--fsync always` on a fresh data
# directory; then, once per round, the same spread writes against the floor (`BareHTTPD writes`: libmicrohttpd,
# group commit and fdatasync, and nothing else). Prints every run, then the medians and the ratios issue 9 sets
# targets for (`scripts/isolation_summary.py`); they go to docs/benchmarks.md.
# Usage: scripts/bench-isolation.sh [BASELINE_BINARY] (default: this checkout's release build only)
#        ROUNDS=3 ITEMS=300000 SECONDS_EACH=5 scripts/bench-isolation.sh /tmp/old/ChangeServer
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ChangeServer >/dev/null
swift build -c release --product Load >/dev/null
swift build -c release --product BareHTTPD >/dev/null
binaries=(".build/release/ChangeServer" "$@")
rounds=${ROUNDS:-3}
items=${ITEMS:-300000}
seconds=${SECONDS_EACH:-5}
port=${ISOLATION_PORT:-18610}
server=
floor=
log=$(mktemp)
# A server left running would take the port (SO_REUSEPORT) and be measured under the next one's name.
trap 'kill $server $floor 2>/dev/null || true; rm -f "$log"' EXIT
# Prints what comes in and keeps it for the summary.
keep() { tee -a "$log"; }
for round in $(seq 1 "$rounds"); do
    for binary in "${binaries[@]}"; do
        data=$(mktemp -d)
        "$binary" --host 127.0.0.1 --port "$port" --data-dir "$data" --fsync always --log-level warning &
        server=$!
        for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
        kill -0 "$server"
        echo "== round $round: $binary" | keep
        .build/release/Load isolation --port "$port" --collection b --items "$items" --seconds "$seconds" | keep
        .build/release/Load writes --port "$port" --collection one --connections 64 --seconds "$seconds" | keep
        .build/release/Load writes --port "$port" --collection many --connections 64 --spread 64 --seconds "$seconds" | keep
        kill "$server"
        wait "$server" || true
        server=
        rm -rf "$data"
    done
    data=$(mktemp -d)
    .build/release/BareHTTPD writes "$port" "$data/journal" &
    floor=$!
    for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.05; done
    kill -0 "$floor"
    echo "== round $round: floor (BareHTTPD writes)" | keep
    .build/release/Load writes --port "$port" --collection many --connections 64 --spread 64 --seconds "$seconds" | keep
    kill "$floor"
    wait "$floor" || true
    floor=
    rm -rf "$data"
done
echo
python3 scripts/isolation_summary.py < "$log"
