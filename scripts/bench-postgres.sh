#!/usr/bin/env bash
# Several servers on one PostgreSQL: durable item upserts per second with 1, 16 and 64 clients through the file
# journal (--fsync always, the baseline), one server on PostgreSQL, and three servers on it (clients spread over
# them, all on one collection, then each server with a collection of its own); the latency from a mutation's
# answer on server A to its delivery on a poll held on server B, next to the same with the poll on A; and the
# restart of a 1,000,000-item collection from its snapshot in PostgreSQL. PostgreSQL 15 runs as a throwaway
# cluster on a free loopback port with fsync and synchronous_commit on, started and stopped here (as the user
# postgres when run as root). ROUNDS rounds.
# Usage: ROUNDS=3 SECONDS_EACH=5 scripts/bench-postgres.sh
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ChangeServer >/dev/null
swift build -c release --product Load >/dev/null
rounds=${ROUNDS:-3}
seconds=${SECONDS_EACH:-5}
bin=/usr/lib/postgresql/15/bin
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
chmod 755 "$work"
as_postgres() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir "$work/pg"
[ "$(id -u)" -eq 0 ] && chown postgres "$work/pg"
chmod 700 "$work/pg"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    as_postgres "$bin/pg_ctl" -D "$work/pg/data" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
pg_port=$(free_port)
as_postgres "$bin/initdb" -D "$work/pg/data" --auth=trust -U postgres >/dev/null
as_postgres "$bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w -o \
    "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on" start >/dev/null
url="postgresql://postgres@127.0.0.1:$pg_port/postgres"
psql_run() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -h "$work/pg" -p "$pg_port" -U postgres -d postgres -c "$1" >/dev/null; }

# Starts a server on port $1 with the other flags, and waits until it answers.
start_server() {
    local port=$1; shift
    .build/release/ChangeServer --host 127.0.0.1 --port "$port" "$@" 2>"$work/server-$port.log" &
    pids+=($!)
    for _ in $(seq 1 200); do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && return
        sleep 0.05
    done
    echo "a server did not start: $(cat "$work/server-$port.log")" >&2
    exit 1
}
stop_servers() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    pids=()
}
fresh_database() {
    psql_run "DROP TABLE IF EXISTS changeserver_records, changeserver_collections, changeserver_snapshots, changeserver_schema"
}

for round in $(seq 1 "$rounds"); do
    echo "== round $round: durable upserts/s (file journal, then PostgreSQL with 1 server, then 3 servers)"
    rm -rf "$work/data"
    port=$(free_port)
    start_server "$port" --data-dir "$work/data" --fsync always --log-level warning
    echo "-- file journal (--fsync always)"
    .build/release/Load writes --port "$port" --connections 1,16,64 --seconds "$seconds" --collection "file$round"
    stop_servers

    fresh_database
    port=$(free_port)
    start_server "$port" --postgres "$url" --log-level warning
    echo "-- PostgreSQL, one server"
    .build/release/Load writes --port "$port" --connections 1,16,64 --seconds "$seconds" --collection "one$round"
    stop_servers

    fresh_database
    p1=$(free_port); p2=$(free_port); p3=$(free_port)
    for p in "$p1" "$p2" "$p3"; do start_server "$p" --postgres "$url" --log-level warning; done
    echo "-- PostgreSQL, three servers (client i on server i mod 3)"
    .build/release/Load writes --ports "$p1,$p2,$p3" --connections 1,16,64 --seconds "$seconds" --collection "three$round"
    echo "-- PostgreSQL, three servers, each client's collection written through one server (--spread 3)"
    .build/release/Load writes --ports "$p1,$p2,$p3" --connections 16,64 --seconds "$seconds" --spread 3 \
        --collection "spread$round"
    echo "-- delivery latency, 1,000 mutations"
    .build/release/Load relay --ports "$p1,$p2" --count 1000 --collection "relay$round"
    stop_servers
done

echo "== restart from PostgreSQL with 1,000,000 items (1,000 sections of 1,000), time to the first answer"
fresh_database
python3 - "$work/big.json" <<'PY'
import json, sys
sections = [{"id": f"s{s}", "items": [{"id": f"i{s}-{i}", "data": {"n": i}} for i in range(1000)]} for s in range(1000)]
with open(sys.argv[1], "w") as out:
    json.dump({"sections": sections}, out, separators=(",", ":"))
PY
port=$(free_port)
start_server "$port" --postgres "$url" --log-level warning --max-body-bytes 100000000 --snapshot-bytes 1000000
curl -sf -X PUT "http://127.0.0.1:$port/v1/collections/big" -H 'Content-Type: application/json' \
    --data-binary @"$work/big.json" -o /dev/null
# One more small record makes this server's bytes pass --snapshot-bytes again: the snapshot follows.
curl -sf -X PUT "http://127.0.0.1:$port/v1/collections/big/items/late" -H 'Content-Type: application/json' \
    -d '{"data":1}' -o /dev/null
for _ in $(seq 1 100); do
    [ "$(PGOPTIONS='-c client_min_messages=warning' psql -X -A -t -q -h "$work/pg" -p "$pg_port" -U postgres -d postgres \
        -c "SELECT count(*) FROM changeserver_snapshots WHERE collection = 'big'")" = 1 ] && break
    sleep 0.2
done
stop_servers
for attempt in 1 2 3; do
    port=$(free_port)
    started=$(date +%s.%N)
    .build/release/ChangeServer --host 127.0.0.1 --port "$port" --postgres "$url" --log-level warning \
        2>"$work/restart.log" &
    pids+=($!)
    for _ in $(seq 1 3000); do
        curl -sf "http://127.0.0.1:$port/v1/collections/big/items/late" -o /dev/null && break
        sleep 0.02
    done
    echo "restart $attempt: $(python3 -c "print(f'{$(date +%s.%N) - $started:.2f} s')")"
    stop_servers
done
