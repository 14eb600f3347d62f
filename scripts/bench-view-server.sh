#!/usr/bin/env bash
# A live view's cost on the whole mutation, through the real server (`docs/benchmarks.md`, "Live views"): a source of
# 1,000,000 items in 1,000 sections like `Bench view`'s (a view keeps about half, sectioned by a field with 50 values,
# sorted by two fields), then COUNT single-item updates that change an item's sort key, sent one at a time over one
# keep-alive connection, first with no view on the source, then with the view defined (without a limit, then with
# `limit 1000`), alternating, ROUNDS times. The cost of a mutation is the server's CPU time (user + system, all
# threads, from /proc) per mutation: parsing, journaling (`--fsync FSYNC`, default always, the server's default),
# applying, the view's maintenance, encoding every changeset, answering. Prints every phase and the medians.
# Usage: ROUNDS=3 COUNT=5000 FSYNC=always scripts/bench-view-server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product ChangeServer >/dev/null
data=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
.build/release/ChangeServer --host 127.0.0.1 --port "$port" --data-dir "$data" --fsync "${FSYNC:-always}" --log-level warning \
    --max-body-bytes 200000000 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
python3 - "$port" "$server" "${ROUNDS:-3}" "${COUNT:-5000}" <<'PY'
import http.client, json, os, random, statistics, sys, time

port, pid, rounds, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ticks = os.sysconf("SC_CLK_TCK")
connection = http.client.HTTPConnection("127.0.0.1", port)

def call(method, path, body=None):
    payload = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    connection.request(method, path, payload, {"Content-Type": "application/json"} if payload else {})
    answer = connection.getresponse()
    text = answer.read()
    if answer.status // 100 != 2:
        sys.exit(f"{method} {path}: {answer.status} {text[:200]}")
    return text

def cpu_seconds():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (all threads, living or not)

random.seed(7)
sections, shown = [], []
for s in range(1000):
    items = []
    for j in range(1000):
        done = random.random() < 0.5
        item = {"id": f"s{s}i{j}", "data": {"bucket": (s * 1000 + j) % 100, "done": done,
                "group": f"g{random.randrange(50)}", "priority": random.randrange(10),
                "title": f"t{random.randrange(1000000)}"}}
        items.append(item)
        if not done:
            shown.append(item)
    sections.append({"id": f"s{s}", "items": items})
call("PUT", "/v1/collections/source", json.dumps({"sections": sections}, separators=(",", ":")).encode())
del sections

definition = {"source": "source", "filter": {"field": "/done", "eq": False}, "sectionBy": {"field": "/group"},
              "sortBy": [{"field": "/priority", "order": "desc"}, {"field": "/title"}]}

def settle():
    """Waits until the server's CPU time stands still for half a second (at most a minute): a large write is
    followed by work in the background (its snapshot), which must not count toward the next phase."""
    last = cpu_seconds()
    for _ in range(120):
        time.sleep(0.5)
        now = cpu_seconds()
        if now == last:
            return
        last = now

def updates():
    """COUNT updates of shown items, each to another priority: a move in the view when it is there."""
    settle()
    before = cpu_seconds()
    for _ in range(count):
        item = random.choice(shown)
        item["data"]["priority"] = (item["data"]["priority"] + random.randrange(1, 10)) % 10
        call("PUT", f"/v1/collections/source/items/{item['id']}", {"data": item["data"]})
    return (cpu_seconds() - before) / count * 1e6

results = {"no view": [], "view, no limit": [], "view, limit 1000": []}
for round in range(1, rounds + 1):
    for name in results:
        if name != "no view":
            view = dict(definition, **({"limit": 1000} if "limit 1000" in name else {}))
            call("PUT", "/v1/views/board", view)
        cost = updates()
        if name != "no view":
            call("DELETE", "/v1/views/board")
        results[name].append(cost)
        print(f"round {round}: {name:18} {cost:8.1f} µs of server CPU per mutation", flush=True)
base = statistics.median(results["no view"])
print(f"\nmedians over {rounds} rounds of {count} mutations each (server CPU per mutation):")
for name, costs in results.items():
    median = statistics.median(costs)
    print(f"  {name:18} {median:8.1f} µs   {median / base:5.2f}x the mutation without a view")
PY
