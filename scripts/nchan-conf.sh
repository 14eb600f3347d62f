# Sourced by the fan-out benchmarks: writes the nginx + nchan configuration of the baseline.
# write_nchan_conf DIR PORT WORKERS: DIR/nginx.conf, with its pid, logs and temporary files in DIR; long-poll
# subscribers on /sub/NAME, publishers on /pub/NAME, no access log.
write_nchan_conf() {
    local dir=$1 port=$2 workers=$3
    cat >"$dir/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_nchan_module.so;
worker_processes $workers;
worker_rlimit_nofile 40000;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 30000; }
http {
    access_log off;
    client_body_temp_path $dir;
    server {
        listen 127.0.0.1:$port;
        location ~ ^/pub/(\w+)$ { nchan_publisher; nchan_channel_id \$1; }
        location ~ ^/sub/(\w+)$ { nchan_subscriber longpoll; nchan_channel_id \$1; }
    }
}
CONF
}
