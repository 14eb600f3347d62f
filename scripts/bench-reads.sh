#!/usr/bin/env bash
# Snapshot reads per core: ChangeServer (one event loop, pinned to CPU 0) against a bare libmicrohttpd handler
# serving the same body with the same options (BareHTTPD, pinned to CPU 0), wrk on CPU 1, alternating, ROUNDS times;
# ChangeServer with its default request log and with --log-level warning. Prints, for every run, req/s and the
# server's CPU time per request (user + system, from /proc, over the wrk run), then the medians and their ratios to
# the bare handler. On a shared VM req/s swings with what the host gives the core; CPU per request does much less.
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
ticks=$(getconf CLK_TCK)

wait_ready() { for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/$1" >/dev/null && return; sleep 0.05; done; }
# utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat; the name in field 2 has no spaces).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Runs wrk against the server `pid` and prints "label req/s µs-of-CPU-per-request".
measure() {
    local label=$1 pid=$2 before after output requests rate
    before=$(cpu_ticks "$pid")
    output=$(taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" "$url")
    after=$(cpu_ticks "$pid")
    requests=$(awk '/requests in/ {print $1}' <<<"$output")
    rate=$(awk '/Requests\/sec/ {print $2}' <<<"$output")
    printf '%-28s %10s req/s %8.2f µs CPU/request\n' "$label" "$rate" \
        "$(awk -v t=$((after - before)) -v n="$requests" -v hz="$ticks" 'BEGIN {print t / hz * 1e6 / n}')" \
        | tee -a "$work/results"
}

server() {
    local label=$1; shift
    taskset -c 0 .build/release/ChangeServer --host 127.0.0.1 --port "$port" --data-dir "$work/data-$label" \
        --fsync never --threads 1 "$@" 2>"$work/log-$label" &
    local pid=$!
    wait_ready healthz
    curl -sf -X PUT "$url" -H 'Content-Type: application/json' \
        -d '{"sections":[{"id":"s","items":[{"id":"a","data":{"text":"hi"}},{"id":"b","data":{"text":"lunch?"}}]}]}' >/dev/null
    curl -sf "$url" -o "$work/body.json"
    measure "$label" "$pid"
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
    measure "bare libmicrohttpd" "$bare"
    kill "$bare"; wait "$bare" || true
done

echo "== medians of $rounds rounds (ratio: of req/s, and of the bare handler's CPU per request to this one's)"
python3 - "$work/results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, rest = line[:28].strip(), line[28:].split()
    runs[label].append((float(rest[0]), float(rest[2])))
bare_rate = statistics.median(r for r, _ in runs["bare libmicrohttpd"])
bare_cpu = statistics.median(c for _, c in runs["bare libmicrohttpd"])
for label, values in runs.items():
    rate = statistics.median(r for r, _ in values)
    cpu = statistics.median(c for _, c in values)
    print(f"{label:28s} {rate:10.0f} req/s ({rate / bare_rate:.2f}x)  {cpu:6.2f} µs CPU/request ({bare_cpu / cpu:.2f}x)")
PY
