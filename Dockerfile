# syntax=docker/dockerfile:1
#
# ChangeServer in two stages: a Swift 6.3 toolchain builds a release binary with the Swift runtime linked in
# statically, and a slim Debian 12 runtime carries only that binary and the two C libraries it links.
#
#   docker build -t changeserver .
#   docker run -p 8080:8080 -v changeserver-data:/data changeserver
#
# Flags go after the image name (`docker run changeserver --history 5000`); every flag also reads its
# CHANGESERVER_* environment variable. Change the port with CHANGESERVER_PORT rather than --port, so that the
# health check follows it.

# ---- build ------------------------------------------------------------------------------------------------
FROM swift:6.3-bookworm AS build

RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends libmicrohttpd-dev libpq-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /build

# The manifest first, so that the dependency layer is cached while only sources change (the package has no
# remote dependencies today; resolving is then a no-op).
COPY ./Package.* ./
RUN swift package resolve

COPY . .

# --static-swift-stdlib: the Swift runtime and Foundation go into the binary; only libmicrohttpd, libpq and
# glibc/libstdc++ stay dynamic.
RUN --mount=type=cache,target=/build/.build \
    swift build -c release --static-swift-stdlib --product ChangeServer \
    && mkdir -p /staging \
    && cp "$(swift build -c release --show-bin-path)/ChangeServer" /staging/ \
    && cp /usr/libexec/swift/linux/swift-backtrace-static /staging/

# ---- run --------------------------------------------------------------------------------------------------
FROM debian:bookworm-slim

# libmicrohttpd12 and libpq5 are the runtime halves of the -dev packages above. No curl: the health
# check below speaks HTTP through bash's /dev/tcp.
RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends libmicrohttpd12 libpq5 \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system changeserver \
    && useradd --system --gid changeserver --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        changeserver \
    && mkdir -p /data \
    && chown changeserver:changeserver /data

COPY --from=build /staging/ChangeServer /usr/local/bin/ChangeServer
COPY --from=build /staging/swift-backtrace-static /usr/local/libexec/swift-backtrace-static

WORKDIR /data
VOLUME /data

ENV CHANGESERVER_HOST=0.0.0.0 \
    CHANGESERVER_PORT=8080 \
    CHANGESERVER_DATA_DIR=/data \
    SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/usr/local/libexec/swift-backtrace-static

USER changeserver:changeserver
EXPOSE 8080

# /healthz never needs a token. bash's /dev/tcp sends the request, so the image needs no HTTP client.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${CHANGESERVER_PORT:-8080} && printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]

# SIGTERM: the server stops accepting, answers held polls 503 with Retry-After, flushes and exits 0 within 5 s
# (about 8 s while large mutations already in the journal are applied; README, "Docker").
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/ChangeServer"]
