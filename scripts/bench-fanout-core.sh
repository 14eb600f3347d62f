#!/usr/bin/env bash
# Fan-out per core: one mutation to SUBSCRIBERS held long polls, the time from the mutation's send to the last
# delivery. ChangeServer (default flags, --fsync never) and nginx + nchan with one worker, each pinned to CPU 0,
# the load tool (Load) on CPU 1; ROUNDS alternating rounds, a fresh server for every run. Prints every run, the
# medians and their ratio (ChangeServer / nchan: below 1 is faster), and the same for the CPU time each server spent
# per delivery (from the mutation's send to the last delivery, all its threads).
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

# One Load run against port $1 whose serving process is $2: prints its total delivery time (ms, from the result line
# for $subscribers) and the CPU time that process spent from the mutation's send to the last delivery (µs per
# delivery, all its threads).
measure() {
    local output
    output=$(taskset -c 1 .build/release/Load fanout --port "$1" --subscribers "$subscribers" --server-pid "$2" "${@:3}")
    awk -v n="$subscribers" '$1 == n && $5 == n {total = $6} /server CPU:/ {cpu = $(NF - 3)} END {print total, cpu}' \
        <<<"$output"
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
    measure "$port" "$pid" >"$work/last" || true
    stop
}

run_nchan() {
    taskset -c 0 nginx -c "$work/nginx.conf" -p "$work" &
    pid=$!
    wait_ready "$nchan_port" pub/warmup
    # One worker (write_nchan_conf ... 1): the master's only child does all the work.
    measure "$nchan_port" "$(pgrep -P "$pid" | head -1)" --nchan 1 >"$work/last" || true
    stop
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-6s %16s %16s %20s %20s\n' round changeserver_ms nchan_ms changeserver_cpu_us nchan_cpu_us
for round in $(seq 1 "$rounds"); do
    # Alternate which goes first, so that neither always runs right after the other's teardown.
    if [ $((round % 2)) -eq 1 ]; then
        run_changeserver; read -r ours ours_cpu <"$work/last" || true
        run_nchan; read -r theirs theirs_cpu <"$work/last" || true
    else
        run_nchan; read -r theirs theirs_cpu <"$work/last" || true
        run_changeserver; read -r ours ours_cpu <"$work/last" || true
    fi
    printf '%-6s %16s %16s %20s %20s\n' "$round" "${ours:-failed}" "${theirs:-failed}" "${ours_cpu:--}" "${theirs_cpu:--}"
    if [ -n "$ours" ]; then echo "$ours" >>"$work/ours"; fi
    if [ -n "$theirs" ]; then echo "$theirs" >>"$work/theirs"; fi
    if [ -n "${ours_cpu:-}" ]; then echo "$ours_cpu" >>"$work/ours_cpu"; fi
    if [ -n "${theirs_cpu:-}" ]; then echo "$theirs_cpu" >>"$work/theirs_cpu"; fi
done
ours=$(median <"$work/ours")
theirs=$(median <"$work/theirs")
ours_cpu=$(median <"$work/ours_cpu")
theirs_cpu=$(median <"$work/theirs_cpu")
printf '%-6s %16s %16s %20s %20s\n' median "$ours" "$theirs" "$ours_cpu" "$theirs_cpu"
awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "ratio (changeserver / nchan, medians): %.2f\n", a / b}'
# The total can be the client's pace: on one core, reading 10,000 answers may take longer than writing them.
awk -v a="$ours_cpu" -v b="$theirs_cpu" \
    'BEGIN {printf "server CPU per delivery, ratio (changeserver / nchan, medians): %.2f\n", a / b}'
