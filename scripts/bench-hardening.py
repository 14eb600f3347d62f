#!/usr/bin/env python3
"""Issue 14's memory figures, for a server binary next to a baseline binary, in the same run (loopback only).

    scripts/bench-hardening.py --server .build/release/ChangeServer --baseline OLD/ChangeServer [--runs 3]

uploads: resident memory while 40 clients without a token each send a 16 MiB body (all but its last byte, so
         that every body is in flight at once), then the answers (401 expected).
parse:   peak resident memory per MiB of a 16 MiB JSON body the server parses: an array of empty objects (the
         densest in values) refused once parsed, the same as a collection's `data`, and a list of small items,
         both stored; /healthz is timed meanwhile.
Prints the median of the runs for each binary and the ratio server / baseline.
"""
import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time

MIB = 1 << 20


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, binary, *arguments):
        self.directory = tempfile.mkdtemp(prefix="bench-hardening-")
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(self.port), "--fsync", "never",
             "--data-dir", self.directory, "--log-level", "warning", *arguments],
            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the server did not start")

    def kb(self, field):
        return status_kb(self.process.pid, field)

    def stop(self):
        self.process.kill()
        self.process.wait()
        subprocess.run(["rm", "-rf", self.directory], check=False)


def read_status(connection):
    data = b""
    while b"\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            return 0
        data += chunk
    return int(data.split(b" ")[1])


def request_head(method, path, length, token=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    return (head + "\r\n").encode()


def uploads(binary):
    """Resident MiB before, with 40 unauthenticated 16 MiB bodies in flight, and how many were refused 401."""
    server = Server(binary, "--write-token", "secret")
    try:
        before = server.kb("VmRSS")
        body = b" " * (16 * MIB)
        connections = []
        for index in range(40):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=60)
            connection.sendall(request_head("PUT", f"/v1/collections/c{index}", len(body)))
            connection.sendall(body[:-1])
            connections.append(connection)
        time.sleep(0.5)
        during = server.kb("VmRSS")
        refused = 0
        for connection in connections:
            connection.sendall(body[-1:])
            refused += read_status(connection) == 401
            connection.close()
        return before / 1024, during / 1024, refused
    finally:
        server.stop()


def dense_array_body(size):
    count = (size - 1) // 3
    return b"[" + b",".join([b"{}"] * count) + b"]"


def dense_data_body(size):
    head, tail = b'{"sections":[{"id":"s","data":[', b"]}]}"
    count = (size - len(head) - len(tail) + 1) // 3
    return head + b",".join([b"{}"] * count) + tail


def items_body(size):
    head, tail = b'{"sections":[{"id":"s","items":[', b"]}]}"
    items, total, index = [], len(head) + len(tail), 0
    while True:
        item = b'{"id":"i%d","data":{"n":%d}}' % (index, index)
        if total + len(item) + 1 > size:
            break
        items.append(item)
        total += len(item) + 1
        index += 1
    return head + b",".join(items) + tail


def parse(binary, body):
    """Peak resident MiB added per MiB of body, the status, and the slowest /healthz while it was parsed."""
    server = Server(binary)
    try:
        before = server.kb("VmHWM")
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=300)
        slowest = [0.0]
        done = threading.Event()

        def probe():
            while not done.is_set():
                started = time.time()
                with socket.create_connection(("127.0.0.1", server.port), timeout=60) as health:
                    health.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    read_status(health)
                slowest[0] = max(slowest[0], time.time() - started)
                time.sleep(0.05)

        prober = threading.Thread(target=probe)
        prober.start()
        connection.sendall(request_head("PUT", "/v1/collections/big", len(body)) + body)
        status = read_status(connection)
        done.set()
        prober.join()
        connection.close()
        peak = server.kb("VmHWM") - before
        return peak / 1024 / (len(body) / MIB), status, slowest[0]
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args()
    binaries = {"server": arguments.server, "baseline": arguments.baseline}

    print("uploads: 40 clients without a token, 16 MiB bodies in flight")
    during = {}
    for name, binary in binaries.items():
        runs = [uploads(binary) for _ in range(arguments.runs)]
        during[name] = statistics.median(run[1] for run in runs)
        print(f"  {name:8} resident before {statistics.median(run[0] for run in runs):7.1f} MiB, "
              f"during {during[name]:7.1f} MiB (median of {arguments.runs}), "
              f"401s {[run[2] for run in runs]}")
    print(f"  ratio server/baseline (during): {during['server'] / during['baseline']:.3f}")

    cases = [
        ("empty objects, refused 400 once parsed (the parse alone)", dense_array_body(16 * MIB)),
        ("data of empty objects, stored", dense_data_body(16 * MIB)),
        ("small items, stored", items_body(16 * MIB)),
    ]
    for label, body in cases:
        print(f"parse: 16 MiB body, {label}")
        peaks = {}
        for name, binary in binaries.items():
            runs = [parse(binary, body) for _ in range(arguments.runs)]
            peaks[name] = statistics.median(run[0] for run in runs)
            print(f"  {name:8} peak {peaks[name]:6.1f} MiB per MiB parsed (median of {arguments.runs}), "
                  f"status {[run[1] for run in runs]}, slowest /healthz "
                  f"{statistics.median(run[2] for run in runs) * 1000:.0f} ms")
        print(f"  ratio server/baseline: {peaks['server'] / peaks['baseline']:.3f}")


if __name__ == "__main__":
    main()
