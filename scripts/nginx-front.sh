#!/usr/bin/env bash
# Runs Debian's nginx in front of a ChangeServer with the shipped configuration (deploy/nginx/changeserver.conf):
#
#   scripts/nginx-front.sh --upstream HOST:PORT --listen PORT --dir DIR [--any-origin]
#
# --any-origin: the server runs with --cors-origin '*' or without --cors-origin, so its answers are the same for
# every Origin, and the polls of every origin collapse together (without it, each origin's collapse on their own,
# as they must when the server names origins one by one: their answers differ).
#
# writes a complete DIR/nginx.conf around that file (cache, temp, log and pid files all in DIR), then becomes nginx
# in the foreground (exec: the script's PID is nginx's master, SIGTERM stops it, the script exits when nginx does,
# with nginx's message and status when the configuration is wrong). The tests, the benchmarks and developers all
# start the cache this way, and take its port accepting a connection for nginx being ready.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
upstream="" listen="" dir="" origin_key='$http_origin'
usage() { echo "usage: $0 --upstream HOST:PORT --listen PORT --dir DIR [--any-origin]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --upstream) upstream="${2:-}"; shift 2 ;;
        --listen) listen="${2:-}"; shift 2 ;;
        --dir) dir="${2:-}"; shift 2 ;;
        --any-origin) origin_key='""'; shift ;;
        *) usage ;;
    esac
done
[ -n "$upstream" ] && [ -n "$listen" ] && [ -n "$dir" ] || usage
[[ "$upstream" =~ ^[^[:space:]/\;]+:[0-9]+$ ]] || { echo "--upstream must be HOST:PORT" >&2; exit 2; }
[[ "$listen" =~ ^([^[:space:]/\;]+:)?[0-9]+$ ]] || { echo "--listen must be PORT or ADDRESS:PORT" >&2; exit 2; }
nginx_binary="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$nginx_binary" ] || { echo "nginx is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }

mkdir -p "$dir/cache" "$dir/temp" "$dir/logs"
# A socket left by an nginx that did not exit cleanly would keep the second tier from listening.
rm -f "$dir/collapse.sock"
dir="$(cd "$dir" && pwd)"
# Run as root (CI, the tests, a container), the workers run as `nobody`, which gets the cache and temp directories
# (the master opens the logs and the sockets). Where `nobody` cannot reach DIR (a parent only root may enter,
# as /root), they stay root, with a warning: nothing but this front then separates the clients from root.
user_line=""
if [ "$(id -u)" -eq 0 ]; then
    mkdir -p "$dir/temp/body" "$dir/temp/proxy" "$dir/temp/fastcgi" "$dir/temp/uwsgi" "$dir/temp/scgi"
    chown -R nobody:nogroup "$dir/cache" "$dir/temp"
    # Entered, not listed: a directory made by mktemp is 0700.
    chmod o+x "$dir"
    if runuser -u nobody -- test -w "$dir/cache" -a -w "$dir/temp/proxy" 2>/dev/null; then
        user_line="user nobody nogroup;"
    else
        echo "nginx-front.sh: nobody cannot reach $dir (a parent directory is private): workers run as root" >&2
        user_line="user root root;"
    fi
fi

sed -e "s|__UPSTREAM__|$upstream|g" -e "s|__LISTEN__|$listen|g" -e "s|__CACHE_DIR__|$dir/cache|g" \
    -e "s|__COLLAPSE_SOCKET__|$dir/collapse.sock|g" -e "s|__ORIGIN_KEY__|$origin_key|g" \
    "$here/deploy/nginx/changeserver.conf" >"$dir/changeserver.conf"
cat >"$dir/nginx.conf" <<CONF
# Written by scripts/nginx-front.sh; the server part is deploy/nginx/changeserver.conf.
$user_line
worker_processes auto;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;

events {
    worker_connections 16000;
}

http {
    client_body_temp_path $dir/temp/body;
    proxy_temp_path $dir/temp/proxy;
    fastcgi_temp_path $dir/temp/fastcgi;
    uwsgi_temp_path $dir/temp/uwsgi;
    scgi_temp_path $dir/temp/scgi;
    log_format changeserver '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent '
                            'cache=\$upstream_cache_status time=\$request_time upstream=\$upstream_response_time';
    access_log $dir/logs/access.log changeserver buffer=64k flush=1s;
    default_type application/octet-stream;
    keepalive_timeout 75s;
    keepalive_requests 100000;
    include $dir/changeserver.conf;
}
CONF
# No `nginx -t` first: it binds and listens on the port too, for as long as it runs, so a client waiting for the
# port took that for the real nginx, and its first requests were refused or reset (a CI failure, 2 in 40 starts
# on a busy machine). nginx checks the configuration itself before it listens.
exec "$nginx_binary" -p "$dir" -c "$dir/nginx.conf" -g "daemon off;"
