#!/usr/bin/env python3
"""Gives every collection and view of a server a new epoch, their content unchanged: run it once against a server
restored from a backup, before its clients reach it (README, "Backups and restores").

A restored server is back at the versions of its backup, under the same epochs. A client that had seen later
versions would, once new writes bring a collection back to its version, get changesets from a past it never saw.
With new epochs every client's cursor is of another epoch: its next poll is `410`, and it starts over from a
snapshot. Each collection is read, deleted and created again with its content (a new epoch, as every creation
gets), then each view is deleted and defined again with its definition.

Usage: scripts/new-epochs.py http://127.0.0.1:8080 [--token TOKEN]   (the write token, when the server has one)
"""
import json
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request


class Refused(Exception):
    pass


def request(base, method, path, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = "Bearer " + token
    call = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(call, timeout=600) as answer:
            text = answer.read()
            return json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        raise Refused(f"{method} {path}: {error.code} {error.read().decode(errors='replace')}")


def names(base, kind, token):
    """Every name of `/v1/<kind>`, page by page."""
    found, after = [], None
    while True:
        query = "?limit=1000" + ("&after=" + urllib.parse.quote(after) if after else "")
        page = request(base, "GET", f"/v1/{kind}{query}", token)
        found += [entry["name"] for entry in page[kind]]
        after = page.get("next")
        if not after:
            return found


def renew(base, token, kind, name, saved):
    """Deletes a collection or view and creates it again as it was; what it was is saved in `saved` first."""
    path = f"/v1/{kind}/{name}"
    current = request(base, "GET", path, token)
    body = {"sections": current["sections"]} if kind == "collections" else current["definition"]
    file = os.path.join(saved, f"{kind}-{name}.json")
    with open(file, "w") as out:
        json.dump(body, out)
    request(base, "DELETE", path, token)
    try:
        created = request(base, "PUT", path, token, body)
    except Refused as refusal:
        raise Refused(f"{refusal}\n{name} was deleted and not created again: PUT the body saved in {file} to {path}")
    print(f"{kind[:-1]} {name}: {current['version']} -> {created['version']}")


def main():
    arguments = sys.argv[1:]
    token = None
    if "--token" in arguments:
        at = arguments.index("--token")
        if at + 1 == len(arguments):
            sys.exit("--token needs a value")
        token = arguments[at + 1]
        del arguments[at : at + 2]
    if len(arguments) != 1:
        sys.exit(__doc__.strip().splitlines()[-1])
    base = arguments[0].rstrip("/")
    try:
        subjects = [(kind, name) for kind in ["collections", "views"] for name in names(base, kind, token)]
        saved = tempfile.mkdtemp(prefix="new-epochs-")
        print(f"each collection's content and each view's definition is saved in {saved} before it is deleted")
        for kind, name in subjects:
            renew(base, token, kind, name, saved)
    except (Refused, urllib.error.URLError, OSError) as failure:
        sys.exit(str(failure))


if __name__ == "__main__":
    main()
