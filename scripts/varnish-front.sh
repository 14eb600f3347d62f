#!/usr/bin/env bash
# Runs Debian's Varnish in front of a ChangeServer with the shipped configuration (deploy/varnish/changeserver.vcl):
#
#   scripts/varnish-front.sh --upstream HOST:PORT --listen PORT --dir DIR
#
# writes DIR/changeserver.vcl with the server's address, then becomes varnishd in the foreground (exec: the
# script's PID is varnishd's, SIGTERM stops it), its working directory and cache in DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
upstream="" listen="" dir=""
usage() { echo "usage: $0 --upstream HOST:PORT --listen PORT --dir DIR" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --upstream) upstream="${2:-}"; shift 2 ;;
        --listen) listen="${2:-}"; shift 2 ;;
        --dir) dir="${2:-}"; shift 2 ;;
        *) usage ;;
    esac
done
[ -n "$upstream" ] && [ -n "$listen" ] && [ -n "$dir" ] || usage
[[ "$upstream" =~ ^([^[:space:]/\;:]+):([0-9]+)$ ]] || { echo "--upstream must be HOST:PORT" >&2; exit 2; }
host="${BASH_REMATCH[1]}" port="${BASH_REMATCH[2]}"
[[ "$listen" =~ ^([^[:space:]/\;]+:)?[0-9]+$ ]] || { echo "--listen must be PORT or ADDRESS:PORT" >&2; exit 2; }
[[ "$listen" == *:* ]] || listen="127.0.0.1:$listen"
varnishd_binary="$(command -v varnishd || echo /usr/sbin/varnishd)"
[ -x "$varnishd_binary" ] || { echo "varnish is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$dir/work"
dir="$(cd "$dir" && pwd)"
sed -e "s|__HOST__|$host|g" -e "s|__PORT__|$port|g" "$here/deploy/varnish/changeserver.vcl" >"$dir/changeserver.vcl"
# varnishd drops root for its own users, which must read the VCL there (DIR's parents must be traversable).
chmod 755 "$dir"
chmod 644 "$dir/changeserver.vcl"
# Measured with 10,000 held polls and one mutation (README, "Varnish."); one line on why for each setting:
parameters=(
    # Waiting requests hold no thread, streams (piped) hold one each: room for thousands of streams.
    -p thread_pool_max=5000 -p thread_pool_min=50
    # When an answer lands its waiting requests all want a thread: past 20 queued per pool (default) the rest drop.
    -p thread_queue_limit=20000
    # Free an answered poll's thread at once, not after 50 ms waiting for a next request: 1,500-5,000 threads a burst.
    -p timeout_linger=0
    # Request workspaces (96k by default) are zeroed whole when freed: 24k holds a feed request and its log buffer.
    -p workspace_client=24k -p vsl_buffer=4k
    # The server refuses past 8 KiB of request headers (431); Varnish refuses past 12k, within the smaller workspace.
    -p http_req_size=12k
    # Idle client connections are kept 75 s (nginx's default), not 5: clients keep theirs about 4 s (Node's fetch),
    # and a busy client reusing one just as Varnish closed it at 5 s saw `fetch failed` (sc_rx_close_idle).
    -p timeout_idle=75
)
exec "$varnishd_binary" -F -f "$dir/changeserver.vcl" -a "$listen" -n "$dir/work" -s malloc,256m "${parameters[@]}"
