#!/usr/bin/env bash
# Installs what ChangeServer needs to build and test on Debian 12 (run as root, or it uses sudo):
# the C libraries it links, the programs its tests start, and the Python tools of the contract and browser tests.
# The Swift 6.3 toolchain is assumed on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libmicrohttpd-dev libpq-dev postgresql-15 pkg-config curl nodejs chromium chromium-driver nginx \
    varnish gdb python3-venv >/dev/null
# The Python tools go into a virtual environment in the repository (.venv, which the tests use when it exists):
# Debian 12's Python refuses `pip install` outside one (PEP 668), and nothing is installed system-wide.
# A .venv whose Python no longer runs (its interpreter was removed or changed) is made again from scratch.
"$here/.venv/bin/python3" -c '' 2>/dev/null || python3 -m venv --clear "$here/.venv"
"$here/.venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$here/scripts/requirements-test.txt"
# The web client's tests (Tests/ChangeServerTests/WebClientTests.swift): node runs its unit tests, Debian's
# chromium and chromium-driver the demo's browser tests (selenium is in requirements-test.txt).
# libpq-dev links the PostgreSQL backend (--postgres); postgresql-15 is the server LivePostgresTests starts as a
# throwaway cluster of its own (initdb in a temporary directory as the user postgres, a free port). Debian's
# package also creates and starts a cluster on port 5432 as a service; the tests do not use it.
# nginx and Varnish: the shipped caches in front of the feed (deploy/), which LiveCacheTests and the cache
# benchmark start themselves through scripts/nginx-front.sh and scripts/varnish-front.sh (no service is used).
# gdb: a test run that hangs prints the stacks of its threads with it before it stops
# (Tests/ProcessSupport/RunWatchdog.swift).
