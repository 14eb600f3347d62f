#!/usr/bin/env bash
# A restart with many small views (`docs/benchmarks.md`, "A restart with views of one value each"): USERS views,
# each filtered to one owner as in `scripts/bench-view-dispatch.sh`, over a source of ITEMS conversations, written
# by this checkout's release build and compacted into one snapshot; then each server binary given (this checkout's
# first, then OLD_BINARY if given) is started on a copy of that data directory, alternating, ROUNDS times.
# Prints, for every start, the milliseconds until `/healthz` answered and the server's own recovery line.
# Usage: ROUNDS=3 USERS=5000 ITEMS=15000 scripts/bench-view-restart.sh [OLD_BINARY]
set -euo pipefail
baselines=()
for binary in "$@"; do baselines+=("$(realpath "$binary")"); done
cd "$(dirname "$0")/.."
swift build -c release --product ChangeServer >/dev/null
binaries=(".build/release/ChangeServer" ${baselines[@]+"${baselines[@]}"})
work=$(mktemp -d)
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits for the server just started ($server) to answer on port $1; fails, with its log ($2), if it exits first
# or does not answer within 120 s.
wait_healthy() {
    for _ in $(seq 1 12000); do
        curl -sf "http://127.0.0.1:$1/healthz" >/dev/null && return 0
        kill -0 "$server" 2>/dev/null || break
        sleep 0.01
    done
    echo "the server on port $1 did not answer:" >&2
    cat "$2" >&2
    exit 1
}

# The data, written with the default thresholds, then compacted (below).
port=$(free_port)
.build/release/ChangeServer --host 127.0.0.1 --port "$port" --data-dir "$work/data" --fsync never \
    --log-level warning --max-views 100000 2>"$work/log" &
server=$!
wait_healthy "$port" "$work/log"
python3 - "$port" "${USERS:-5000}" "${ITEMS:-15000}" <<'PY'
import http.client, json, sys

sys.path.insert(0, "scripts")
import chat_views

port, users, items = (int(value) for value in sys.argv[1:4])
connection = http.client.HTTPConnection("127.0.0.1", port)

def call(method, path, body):
    connection.request(method, path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    answer = connection.getresponse()
    text = answer.read()
    if answer.status // 100 != 2:
        sys.exit(f"{method} {path}: {answer.status} {text[:200]}")

_, conversations = chat_views.conversations(users, items)
call("PUT", "/v1/collections/convs", {"sections": [{"id": "all", "items": conversations}]})
for user in range(users):
    call("PUT", f"/v1/views/inbox-u{user}", chat_views.inbox(user))
print(f"{items} items and {users} views written", flush=True)
PY
kill "$server"
wait "$server" || true
# Started again with a lower threshold, the server compacts everything it replayed into a snapshot at once.
.build/release/ChangeServer --host 127.0.0.1 --port "$port" --data-dir "$work/data" --fsync never \
    --log-level warning --max-views 100000 --snapshot-bytes 4096 2>"$work/log" &
server=$!
wait_healthy "$port" "$work/log"
# The data directory had no snapshot: one is there once it is written whole (renamed into place).
for _ in $(seq 1 600); do [ -f "$work/data/snapshot.bin" ] && break; sleep 0.1; done
[ -f "$work/data/snapshot.bin" ] || { echo "no snapshot was written in 60 s" >&2; exit 1; }
kill "$server"
wait "$server" || true
server=

for round in $(seq 1 "${ROUNDS:-3}"); do
    for binary in "${binaries[@]}"; do
        rm -rf "$work/copy"
        cp -a "$work/data" "$work/copy"
        port=$(free_port)
        started=$(date +%s%N)
        "$binary" --host 127.0.0.1 --port "$port" --data-dir "$work/copy" --fsync never --log-level notice \
            --max-views 100000 2>"$work/log" &
        server=$!
        wait_healthy "$port" "$work/log"
        echo "round $round $binary: healthz after $(( ($(date +%s%N) - started) / 1000000 )) ms;" \
            "$(grep -o 'recovered.*' "$work/log" | head -1)"
        kill "$server"
        wait "$server" || true
        server=
    done
done
