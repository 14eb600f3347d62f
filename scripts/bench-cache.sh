#!/usr/bin/env bash
# The feed through the shipped caches and as event streams (README, "The feed through HTTP caches"), measured
# by Load in one run on loopback: N long-poll subscribers straight to the server (the baseline), the same N
# through nginx (scripts/nginx-front.sh) and through Varnish (scripts/varnish-front.sh), then N event streams
# (one mutation, then --sustained rounds, and the server's memory per idle stream), and last the same number of
# mutations sent by 4 writers back to back, to streams and to polls (`Load fanout --burst 4`). Every process it
# starts is stopped by its PID when it ends.
# Usage: scripts/bench-cache.sh [--subscribers 10000] [--sustained 10]
set -euo pipefail
cd "$(dirname "$0")/.."
subscribers=10000 sustained=10
while [ $# -gt 0 ]; do
    case "$1" in
        --subscribers) subscribers="$2"; shift 2 ;;
        --sustained) sustained="$2"; shift 2 ;;
        *) echo "usage: $0 [--subscribers N] [--sustained K]" >&2; exit 2 ;;
    esac
done
swift build -c release --product ChangeServer >/dev/null
swift build -c release --product Load >/dev/null
base=${BENCH_PORT:-18960}
work=$(mktemp -d)
# varnishd's own users must reach its directory inside.
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
.build/release/ChangeServer --host 127.0.0.1 --port "$base" --data-dir "$work/data" --fsync never \
    --log-level warning --max-held-polls 100000 2>"$work/server.log" &
server=$!
pids+=("$server")
scripts/nginx-front.sh --upstream "127.0.0.1:$base" --listen "127.0.0.1:$((base + 1))" --dir "$work/nginx" \
    >"$work/nginx.out" 2>&1 &
pids+=("$!")
scripts/varnish-front.sh --upstream "127.0.0.1:$base" --listen "127.0.0.1:$((base + 2))" --dir "$work/varnish" \
    >"$work/varnish.out" 2>&1 &
pids+=("$!")
wait_for_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.2
    done
    echo "nothing listens on port $1" >&2
    return 1
}
wait_for_port "$base" && wait_for_port "$((base + 1))" && wait_for_port "$((base + 2))"
load() { .build/release/Load fanout --port "$base" --subscribers "$subscribers" "$@" || echo "(failed)"; }
echo "== long-poll, direct to the server (baseline)"
load --collection direct --server-pid "$server"
echo "== long-poll through nginx"
load --collection nginx --front "$((base + 1))"
echo "== long-poll through Varnish"
load --collection varnish --front "$((base + 2))"
echo "== event streams, direct: one mutation, then $sustained"
load --collection streams --sse 1 --server-pid "$server"
load --collection sustained --sse 1 --sustained "$sustained"
echo "== long-poll, direct, $sustained mutations (the same run's long-poll figure)"
load --collection sustainedpoll --sustained "$sustained"
echo "== $sustained mutations from 4 writers back to back: event streams, then long-poll"
load --collection burststreams --sse 1 --sustained "$sustained" --burst 4 --server-pid "$server"
load --collection burstpolls --sustained "$sustained" --burst 4 --server-pid "$server"
