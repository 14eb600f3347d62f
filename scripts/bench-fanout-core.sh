#!/usr/bin/env bash
# Fan-out per core: one mutation to SUBSCRIBERS held long polls, the time from the mutation's send to the last
# delivery. ChangeServer (default flags, --fsync never) and nginx + nchan with one worker, each pinned to CPU 0,
# the load tool (Load) on CPU 1; ROUNDS alternating rounds, a fresh server for every run. Prints every run, the
# medians and their ratio (ChangeServer / nchan: below 1 is faster).
# Usage: ROUNDS=7 SUBSCRIBERS=10000 scripts/bench-fanout-core.sh [PATH/TO/ChangeServer, default this checkout's]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -e /usr/lib/nginx/modules/ngx_nchan_module.so ]; then
    echo "needs nginx with the nchan module (apt-get install nginx-light libnginx-mod-nchan)" >&2
    exit 2
fi
rounds=${ROUNDS:-7}
subscribers=${SUBSCRIBERS:-10000}
port=${FANOUT_PORT:-18640}
nchan_port=${NCHAN_PORT:-18641}
swift build -c release --product ChangeServer >/dev/null
swift build -c release --product Load >/dev/null
server_binary=${1:-.build/release/ChangeServer}
work=$(mktemp -d)
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

. scripts/nchan-conf.sh
write_nchan_conf "$work" "$nchan_port" 1

# Waits (at most 5 s) for a port to answer HTTP.
wait_ready() {
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$1/$2" && return 0
        sleep 0.05
    done
    echo "nothing answers on port $1" >&2
    return 1
}

# The total delivery time (ms) of one Load run, from its result line for $subscribers.
measure() {
    local output
    output=$(taskset -c 1 .build/release/Load fanout --port "$1" --subscribers "$subscribers" "${@:2}")
    awk -v n="$subscribers" '$1 == n && $5 == n {print $6}' <<<"$output"
}

stop() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
}

run_changeserver() {
    rm -rf "$work/data"
    taskset -c 0 "$server_binary" --host 127.0.0.1 --port "$port" --data-dir "$work/data" --fsync never \
        2>"$work/changeserver.log" &
    pid=$!
    wait_ready "$port" healthz
    measure "$port" >"$work/last" || true
    stop
}

run_nchan() {
    taskset -c 0 nginx -c "$work/nginx.conf" -p "$work" &
    pid=$!
    wait_ready "$nchan_port" pub/warmup
    measure "$nchan_port" --nchan 1 >"$work/last" || true
    stop
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-6s %16s %16s\n' round changeserver_ms nchan_ms
for round in $(seq 1 "$rounds"); do
    # Alternate which goes first, so that neither always runs right after the other's teardown.
    if [ $((round % 2)) -eq 1 ]; then
        run_changeserver; ours=$(cat "$work/last")
        run_nchan; theirs=$(cat "$work/last")
    else
        run_nchan; theirs=$(cat "$work/last")
        run_changeserver; ours=$(cat "$work/last")
    fi
    printf '%-6s %16s %16s\n' "$round" "${ours:-failed}" "${theirs:-failed}"
    if [ -n "$ours" ]; then echo "$ours" >>"$work/ours"; fi
    if [ -n "$theirs" ]; then echo "$theirs" >>"$work/theirs"; fi
done
ours=$(median <"$work/ours")
theirs=$(median <"$work/theirs")
printf '%-6s %16s %16s\n' median "$ours" "$theirs"
awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "ratio (changeserver / nchan, medians): %.2f\n", a / b}'
