/*
 * BareHTTPD: the baseline of the read benchmark (scripts/bench-reads.sh). A bare libmicrohttpd handler that
 * answers every request with one static body and the headers ChangeServer sends with a snapshot, with the daemon
 * options ChangeServer uses (MHD_USE_EPOLL driven by an epoll loop of its own, the same connection memory and
 * limits), so that the difference is what ChangeServer adds per request. Loopback only.
 *
 *   BareHTTPD PORT BODY_FILE
 *
 * `BareHTTPD writes` is the floor of the durable-writes benchmark instead (writes.c).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

int run_writes(int argc, char **argv);

static char *body;
static size_t body_length;

static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **context) {
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    static int first;
    /* As ChangeServer does: answer from the second call on (the first carries only the headers). */
    if (*context == NULL) {
        *context = &first;
        return MHD_YES;
    }
    struct MHD_Response *response = MHD_create_response_from_buffer(body_length, body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(response, "Content-Type", "application/json; charset=utf-8");
    MHD_add_response_header(response, "ETag", "\"bare.1\"");
    enum MHD_Result result = MHD_queue_response(connection, 200, response);
    MHD_destroy_response(response);
    return result;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "writes")) return run_writes(argc, argv);
    if (argc != 3) {
        fprintf(stderr, "usage: BareHTTPD PORT BODY_FILE\n");
        return 2;
    }
    FILE *file = fopen(argv[2], "rb");
    if (!file) return 1;
    body = malloc(1 << 20);
    body_length = fread(body, 1, 1 << 20, file);
    fclose(file);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, &address,
        MHD_OPTION_CONNECTION_LIMIT, 30000u, MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)8192, MHD_OPTION_END);
    if (!daemon) return 1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    int loop = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event watch = {.events = EPOLLIN, .data.fd = info->epoll_fd};
    epoll_ctl(loop, EPOLL_CTL_ADD, info->epoll_fd, &watch);
    struct epoll_event events[4];
    for (;;) {
        MHD_UNSIGNED_LONG_LONG timeout = 1000;
        int wait = MHD_get_timeout(daemon, &timeout) == MHD_YES && timeout < 1000 ? (int)timeout : 1000;
        epoll_wait(loop, events, 4, wait);
        MHD_run(daemon);
    }
}
