#!/usr/bin/env bash
# Snapshot reads per core: ChangeServer (one event loop, pinned to CPU 0) against a bare libmicrohttpd handler
# serving the same body with the same options (BareHTTPD, pinned to CPU 0), wrk on CPU 1, alternating, ROUNDS times;
# ChangeServer with its default request log and with --log-level warning. Prints req/s of every run.
# Usage: ROUNDS=3 SECONDS_EACH=10 CONNECTIONS=64 scripts/bench-reads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 2; }
swift build -c release --product ChangeServer >/dev/null
swift build -c release --product BareHTTPD >/dev/null
rounds=${ROUNDS:-3}
seconds=${SECONDS_EACH:-10}
connections=${CONNECTIONS:-64}
port=${READS_PORT:-18620}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
url="http://127.0.0.1:$port/v1/collections/inbox"

wait_ready() { for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/$1" >/dev/null && return; sleep 0.05; done; }
measure() { taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" "$url" | awk '/Requests\/sec/ {print $2}'; }

server() {
    local label=$1; shift
    taskset -c 0 .build/release/ChangeServer --host 127.0.0.1 --port "$port" --data-dir "$work/data-$label" \
        --fsync never --threads 1 "$@" 2>"$work/log-$label" &
    local pid=$!
    wait_ready healthz
    curl -sf -X PUT "$url" -H 'Content-Type: application/json' \
        -d '{"sections":[{"id":"s","items":[{"id":"a","data":{"text":"hi"}},{"id":"b","data":{"text":"lunch?"}}]}]}' >/dev/null
    curl -sf "$url" -o "$work/body.json"
    printf '%-28s %s req/s\n' "$label" "$(measure)"
    kill "$pid"; wait "$pid" || true
    rm -rf "$work/data-$label"
}

for round in $(seq 1 "$rounds"); do
    echo "== round $round"
    server "changeserver (request log)"
    server "changeserver (warning)" --log-level warning
    taskset -c 0 .build/release/BareHTTPD "$port" "$work/body.json" &
    bare=$!
    sleep 0.3
    printf '%-28s %s req/s\n' "bare libmicrohttpd" "$(measure)"
    kill "$bare"; wait "$bare" || true
done
