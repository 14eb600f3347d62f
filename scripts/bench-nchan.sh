#!/usr/bin/env bash
# The baseline of the fan-out benchmark: nginx with the nchan module (Debian's packages), long-poll
# subscribers on one channel, measured by the same load tool in the same conditions as ChangeServer.
# Usage: scripts/bench-nchan.sh [Load fanout options, e.g. --subscribers 100,1000,10000]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -e /usr/lib/nginx/modules/ngx_nchan_module.so ]; then
    as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light libnginx-mod-nchan >/dev/null
fi
swift build -c release --product Load >/dev/null
port=${NCHAN_PORT:-18790}
work=$(mktemp -d)
. scripts/nchan-conf.sh
write_nchan_conf "$work" "$port" 2
nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!
trap 'kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.5
.build/release/Load fanout --port "$port" --nchan 1 "$@"
