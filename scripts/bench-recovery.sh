#!/usr/bin/env bash
# Restart time with a torn 12 MB record at the end of the journal (a crash in the middle of its write), for the
# server built from this checkout and for one built from an older commit, on copies of the same data, in one run.
#
#   scripts/bench-recovery.sh [old-commit]        # default 7bdad6f: recovery before the linear frame search
#
# BENCH_DIR=dir keeps the builds and data there (reused when present); OLD_BINARY=path skips building the old
# server. Both servers are built in release mode. Each one is started on its own copy of the data directory and
# timed from exec to its "listening on" line; then it is stopped by its PID.
set -euo pipefail

old_commit=${1:-7bdad6f}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${BENCH_DIR:-$(mktemp -d /tmp/changeserver-bench-recovery.XXXXXX)}
mkdir -p "$work"
echo "work directory: $work"

if [ -z "${OLD_BINARY:-}" ]; then
    if [ ! -x "$work/old/.build/release/ChangeServer" ]; then
        rm -rf "$work/old" && mkdir -p "$work/old"
        git -C "$root" archive "$old_commit" | tar -x -C "$work/old"
        (cd "$work/old" && nice -n 5 swift build -c release --product ChangeServer >"$work/old-build.log" 2>&1)
    fi
    OLD_BINARY=$work/old/.build/release/ChangeServer
fi
(cd "$root" && nice -n 5 swift build -c release --product ChangeServer >"$work/new-build.log" 2>&1)
NEW_BINARY=$root/.build/release/ChangeServer

python3 - "$work" "$OLD_BINARY" "$NEW_BINARY" "$old_commit" <<'PYTHON'
import glob, http.client, json, os, re, shutil, signal, subprocess, sys, time

work, old_binary, new_binary, old_commit = sys.argv[1:5]

def start(binary, data):
    """Starts a server on `data`; returns the process, its port and the seconds until it listened."""
    started = time.monotonic()
    process = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", "0", "--fsync", "never", "--data-dir", data,
         "--max-body-bytes", str(64 << 20)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        found = re.search(r"listening on [^ ]+:(\d+)", line)
        if found:
            return process, int(found.group(1)), time.monotonic() - started
    raise SystemExit(f"{binary} did not start (exit {process.wait()})")

def stop(process):
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)

# The data: one collection of small items (12 MB of journal record), written by the new server, its record then
# cut by a third as a crash in the middle of its write would leave it.
data = os.path.join(work, "data")
shutil.rmtree(data, ignore_errors=True)
items = [{"id": f"item-{index}", "data": {"n": index % 1000}} for index in range(460_000)]
body = json.dumps({"sections": [{"id": "s", "items": items}]}).encode()
process, port, _ = start(new_binary, data)
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
connection.request("PUT", "/v1/collections/big", body, {"Content-Type": "application/json"})
response = connection.getresponse()
response.read()
assert response.status == 201, response.status
stop(process)
[segment] = glob.glob(os.path.join(data, "journal-*.log"))
record = os.path.getsize(segment) - 16
os.truncate(segment, 16 + record - record // 3)
print(f"body {len(body) / 1e6:.1f} MB; journal record {record / 1e6:.1f} MB, cut to {(record - record // 3) / 1e6:.1f} MB")

for name, binary in [(f"old ({old_commit})", old_binary), ("new (this checkout)", new_binary)]:
    copy = os.path.join(work, "data-" + name.split()[0])
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(data, copy)
    process, _, seconds = start(binary, copy)
    stop(process)
    print(f"{name}: restart with the torn record took {seconds:.3f} s")
    shutil.rmtree(copy)
PYTHON
