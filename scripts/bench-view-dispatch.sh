#!/usr/bin/env bash
# Many small views over one source (`docs/benchmarks.md`, "Views of one value each"): a chat list per user, USERS
# views each filtered to one owner (`{"all": [{"field": "/owner", "eq": "uN"}, {"field": "/archived", "ne": true}]}`,
# sorted by time) over a source of ITEMS conversations, then COUNT single-item upserts that change a conversation's
# time, sent one at a time over one keep-alive connection, to that source and to a source of the same items with
# no view, alternating, ROUNDS times. Each server binary given (this checkout's release build first, then
# BASELINE_BINARY if given) runs on its own port and data directory, set up once, measured in turn. Prints every
# phase: upserts per second and the server's CPU time per upsert (user + system, all threads, from /proc).
# Usage: ROUNDS=3 COUNT=1000 USERS=5000 ITEMS=15000 scripts/bench-view-dispatch.sh [BASELINE_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ChangeServer >/dev/null
binaries=(".build/release/ChangeServer" "$@")
servers=()
ports=()
data=()
cleanup() {
    for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${servers[@]}"; do wait "$pid" 2>/dev/null || true; done
    for directory in "${data[@]}"; do rm -rf "$directory"; done
}
trap cleanup EXIT
for binary in "${binaries[@]}"; do
    directory=$(mktemp -d)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$binary" --host 127.0.0.1 --port "$port" --data-dir "$directory" --fsync always --log-level warning \
        --max-views 100000 &
    servers+=($!)
    ports+=("$port")
    data+=("$directory")
    for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || { echo "$binary did not answer on port $port" >&2; exit 1; }
done
python3 - "${ROUNDS:-3}" "${COUNT:-1000}" "${USERS:-5000}" "${ITEMS:-15000}" \
    "$(IFS=,; echo "${binaries[*]}")" "$(IFS=,; echo "${ports[*]}")" "$(IFS=,; echo "${servers[*]}")" <<'PY'
import http.client, json, os, random, statistics, sys, time

sys.path.insert(0, "scripts")
import chat_views

rounds, count, users, items = (int(value) for value in sys.argv[1:5])
binaries, ports, pids = sys.argv[5].split(","), [int(p) for p in sys.argv[6].split(",")], sys.argv[7].split(",")
ticks = os.sysconf("SC_CLK_TCK")

def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks

class Server:
    def __init__(self, binary, port, pid):
        self.binary, self.pid = binary, pid
        self.connection = http.client.HTTPConnection("127.0.0.1", port)
        self.results = {"views": [], "plain": []}

    def call(self, method, path, body):
        self.connection.request(method, path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        answer = self.connection.getresponse()
        text = answer.read()
        if answer.status // 100 != 2:
            sys.exit(f"{method} {path}: {answer.status} {text[:200]}")

owners, conversations = chat_views.conversations(users, items)
servers = [Server(*server) for server in zip(binaries, ports, pids)]
for server in servers:
    started = time.monotonic()
    for source in ("convs", "plain"):
        server.call("PUT", f"/v1/collections/{source}", {"sections": [{"id": "all", "items": conversations}]})
    for user in range(users):
        server.call("PUT", f"/v1/views/inbox-u{user}", chat_views.inbox(user))
    print(f"{server.binary}: {items} items, {users} views defined in {time.monotonic() - started:.1f} s", flush=True)

clock = items
for round in range(1, rounds + 1):
    for server in servers:
        for source in ("views", "plain"):
            path = "/v1/collections/" + ("convs" if source == "views" else "plain") + "/items/"
            cpu, started = cpu_seconds(server.pid), time.monotonic()
            for _ in range(count):
                clock += 1
                k = random.randrange(items)
                server.call("PUT", path + f"c{k}", {"data": {"owner": owners[k], "at": clock, "archived": False}})
            elapsed, used = time.monotonic() - started, cpu_seconds(server.pid) - cpu
            server.results[source].append((count / elapsed, used / count * 1e6))
            print(f"round {round} {server.binary} {source}: {count / elapsed:,.0f} upserts/s, "
                  f"{used / count * 1e6:,.0f} us of server CPU per upsert", flush=True)
for server in servers:
    for source, runs in server.results.items():
        print(f"median {server.binary} {source}: {statistics.median(r[0] for r in runs):,.0f} upserts/s, "
              f"{statistics.median(r[1] for r in runs):,.0f} us per upsert")
PY
