#!/usr/bin/env python3
"""Gives every collection and view of a data directory restored from a backup a new epoch, their content
unchanged, before any client reaches it (README, "Durability", *Backups and restores*).

  scripts/new-epochs.py --data-dir DIR [--server PATH]
      starts the server on DIR itself (127.0.0.1, a port of its own, no token, a body limit of 1 GiB, no disk
      reserve), renews everything, and stops it. PATH: the ChangeServer binary (default: this checkout's release
      build, else `ChangeServer` on PATH). The directory must not be in use by another server.
  scripts/new-epochs.py URL [--token TOKEN] [--max-body-bytes N]
      renews through a server you started on the restored directory (or database, with --postgres) and keep away
      from clients (a Docker container published on 127.0.0.1 only, say). TOKEN: the write token (or the read token of a server with only
      that); N: the server's --max-body-bytes (default 16777216).

A restored server is back at the versions of its backup, under the same epochs. A client that had seen later
versions would, once new writes bring a collection back to its version, be answered from a past it never saw.
With new epochs every client's cursor is of another epoch: its next poll is `410` (`404` for a collection
created after the backup), and it starts over from a snapshot.

Every collection's content and every view's definition is first saved in a new folder of the current directory,
and every body checked against the body limit: nothing is deleted unless all of them fit. Then each collection is
deleted and created again from its saved copy (a new epoch, as every creation gets; its history starts over),
and each view deleted and defined again. The folder is removed once everything is done; after a failure it is kept,
and the message says what to put back.
"""
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

OWN_SERVER_BODY_LIMIT = 1 << 30


class Failure(Exception):
    pass


def request(base, method, path, token, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = "Bearer " + token
    call = urllib.request.Request(base + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(call, timeout=600) as answer:
            text = answer.read()
            return json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        raise Failure(f"{method} {path}: {error.code} {error.read().decode(errors='replace')}")
    except OSError as error:  # URLError too, which is one
        raise Failure(f"{method} {base}{path}: {getattr(error, 'reason', error)}")


def listed(base, kind, token):
    """Every entry of `/v1/<kind>` (name and version), page by page."""
    found, after = [], None
    while True:
        query = "?limit=1000" + ("&after=" + urllib.parse.quote(after) if after else "")
        page = request(base, "GET", f"/v1/{kind}{query}", token)
        found += [(entry["name"], entry["version"]) for entry in page[kind]]
        after = page.get("next")
        if not after:
            return found


def renew_all(base, token, body_limit):
    subjects = [(kind, name, version) for kind in ["collections", "views"] for name, version in listed(base, kind, token)]
    saved = os.path.abspath(datetime.datetime.now().strftime("new-epochs-%Y%m%d-%H%M%S-") + str(os.getpid()))
    os.mkdir(saved)
    files = []
    for kind, name, _ in subjects:
        current = request(base, "GET", f"/v1/{kind}/{name}", token)
        body = {"sections": current["sections"]} if kind == "collections" else current["definition"]
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        file = os.path.join(saved, f"{kind}-{name}.json")
        with open(file, "wb") as out:
            out.write(data)
        files.append(file)
        if len(data) > body_limit:
            shutil.rmtree(saved)
            raise Failure(f"{kind[:-1]} {name} takes {len(data)} bytes, over the body limit of {body_limit}: nothing"
                          " was changed")
    for (kind, name, version), file in zip(subjects, files):
        path = f"/v1/{kind}/{name}"
        try:
            request(base, "DELETE", path, token)
        except Failure as failure:
            raise Failure(f"{failure}\n{kind[:-1]} {name} and the ones after it were not changed (copies in {saved})")
        with open(file, "rb") as saved_body:
            data = saved_body.read()
        try:
            created = request(base, "PUT", path, token, data)
        except Failure as failure:
            raise Failure(
                f"{failure}\n{kind[:-1]} {name} was deleted and not created again: start the server on the restored"
                f" directory and put it back, e.g. `curl -X PUT --json @{file} <server>{path}`, then run this"
                " script again (the other copies are in the same folder)")
        print(f"{kind[:-1]} {name}: {version} -> {created['version']}", flush=True)
    shutil.rmtree(saved)


def default_server():
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "release", "ChangeServer")
    return os.path.normpath(built) if os.path.exists(built) else "ChangeServer"


def with_own_server(data_dir, server):
    """Starts `server` on `data_dir` (127.0.0.1, a free port), runs the renewal through it, and stops it."""
    # CHANGESERVER_* settings of this shell (a token, --postgres) must not reach the server started here.
    environment = {key: value for key, value in os.environ.items() if not key.startswith("CHANGESERVER_")}
    arguments = [
        server, "--data-dir", data_dir, "--host", "127.0.0.1", "--port", "0", "--log-level", "notice",
        "--max-body-bytes", str(OWN_SERVER_BODY_LIMIT), "--disk-reserve-bytes", "0",
    ]
    try:
        process = subprocess.Popen(arguments, stderr=subprocess.PIPE, env=environment, text=True)
    except OSError as error:
        raise Failure(f"cannot start {server}: {error}")
    lines = []
    port = None
    for line in process.stderr:
        lines.append(line)
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    if port is None:
        process.wait()
        raise Failure(f"the server did not start on {data_dir} (exit {process.returncode}):\n" + "".join(lines[-20:]))
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
    failure = None
    try:
        renew_all(f"http://127.0.0.1:{port}", None, OWN_SERVER_BODY_LIMIT)
    except Failure as error:
        failure = error
    process.send_signal(signal.SIGTERM)
    try:
        status = process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        status = process.wait()
    if failure:
        raise failure
    if status != 0:
        raise Failure(f"the server on {data_dir} exited with status {status} after the renewal")


def main():
    arguments = sys.argv[1:]
    if not arguments or arguments[0] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if arguments else 2)
    options = {}
    for flag in ["--data-dir", "--server", "--token", "--max-body-bytes"]:
        if flag in arguments:
            at = arguments.index(flag)
            if at + 1 == len(arguments):
                sys.exit(f"{flag} needs a value")
            options[flag] = arguments[at + 1]
            del arguments[at : at + 2]
    try:
        if "--data-dir" in options:
            if arguments or "--token" in options or "--max-body-bytes" in options:
                sys.exit("--data-dir starts a server of its own: give no URL, --token or --max-body-bytes with it")
            with_own_server(options["--data-dir"], options.get("--server", default_server()))
        else:
            if len(arguments) != 1 or "--server" in options:
                sys.exit("give --data-dir DIR, or a server's URL (see --help)")
            limit = int(options.get("--max-body-bytes", 16 << 20))
            renew_all(arguments[0].rstrip("/"), options.get("--token"), limit)
    except (Failure, ValueError, OSError) as failure:
        sys.exit(str(failure))


if __name__ == "__main__":
    main()
