/*
 * fanout-load: measures how fast ChangeServer pushes one change to many held long polls.
 *
 * It opens N subscribers on one collection at its current version (one connection each, all in one epoll loop,
 * so the client costs far less CPU than the server), waits until the server's /metrics reports them held, sends
 * one mutation and records, for every subscriber, the time from the mutation's send to its complete response.
 * The sustained mode repeats that K times, each mutation sent once every subscriber has its previous changeset
 * and has polled again, and reports deliveries per second. Loopback only; every wait is bounded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    char buffer[16384];
    size_t used;
    int done;          /* the current round's response has arrived */
    double latency_ms; /* of the current round */
} Subscriber;

static const char *host = "127.0.0.1";
static int port = 8080;
static const char *collection = "fanout";
static char version[128];

static double now_ms(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return spec.tv_sec * 1e3 + spec.tv_nsec / 1e6;
}

static int open_connection(int blocking) {
    int fd = socket(AF_INET, SOCK_STREAM | (blocking ? 0 : SOCK_NONBLOCK), 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &address.sin_addr);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One blocking request on a fresh connection; returns the status, the body copied into `body`. */
static int request(const char *method, const char *path, const char *json, char *body, size_t capacity) {
    int fd = open_connection(1);
    if (fd < 0) return -1;
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char head[1024];
    size_t length = json ? strlen(json) : 0;
    int head_length = json ? snprintf(head, sizeof head,
                                      "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                                      method, path, host, length)
                           : snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                                      method, path, host);
    if (write(fd, head, head_length) != head_length || (json && write(fd, json, length) != (ssize_t)length)) {
        close(fd);
        return -1;
    }
    static char response[1 << 20];
    size_t used = 0;
    ssize_t count;
    while (used < sizeof response - 1 && (count = read(fd, response + used, sizeof response - 1 - used)) > 0) used += count;
    close(fd);
    response[used] = 0;
    int status = 0;
    sscanf(response, "HTTP/1.%*d %d", &status);
    char *start = strstr(response, "\r\n\r\n");
    if (body && capacity) {
        snprintf(body, capacity, "%s", start ? start + 4 : "");
    }
    return status;
}

/* Reads `"version":"..."` (or `"to":"..."`) out of a JSON body. */
static int extract(const char *body, const char *key, char *out, size_t capacity) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *start = strstr(body, pattern);
    if (!start) return 0;
    start += strlen(pattern);
    const char *end = strchr(start, '"');
    if (!end || (size_t)(end - start) >= capacity) return 0;
    memcpy(out, start, end - start);
    out[end - start] = 0;
    return 1;
}

static long held_polls(void) {
    static char body[1 << 20];
    if (request("GET", "/metrics", NULL, body, sizeof body) != 200) return -1;
    const char *line = strstr(body, "\nchangeserver_held_polls ");
    return line ? strtol(line + strlen("\nchangeserver_held_polls "), NULL, 10) : -1;
}

static int wait_for_held(long count, double timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        if (held_polls() >= count) return 1;
        usleep(20000);
    }
    return 0;
}

static void send_poll(Subscriber *subscriber) {
    char head[512];
    int length = snprintf(head, sizeof head,
                          "GET /v1/collections/%s/changes?since=%s&timeout=120 HTTP/1.1\r\nHost: %s\r\n\r\n",
                          collection, version, host);
    subscriber->used = 0;
    subscriber->done = 0;
    if (write(subscriber->fd, head, length) != length) subscriber->done = -1;
}

/* Whether the subscriber's buffer holds one whole response (headers and Content-Length body). */
static int complete(Subscriber *subscriber) {
    subscriber->buffer[subscriber->used] = 0;
    char *end = strstr(subscriber->buffer, "\r\n\r\n");
    if (!end) return 0;
    char *field = strcasestr(subscriber->buffer, "\r\nContent-Length:");
    size_t length = field ? strtoul(field + 17, NULL, 10) : 0;
    return subscriber->used >= (size_t)(end + 4 - subscriber->buffer) + length;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sends one mutation and reads every subscriber's response; returns how many arrived. */
static int round_trip(Subscriber *subscribers, int count, int epoll_fd, int sequence, double timeout_ms,
                      double *elapsed_ms) {
    char ops[512], body[4096], path[256];
    snprintf(ops, sizeof ops,
             "{\"ops\":[{\"op\":\"insertItems\",\"at\":[0,0],\"items\":[{\"id\":\"m%d\",\"data\":{\"n\":%d}}]}]}",
             sequence, sequence);
    snprintf(path, sizeof path, "/v1/collections/%s/mutations", collection);
    double sent = now_ms();
    int status = request("POST", path, ops, body, sizeof body);
    if (status != 200 || !extract(body, "version", version, sizeof version)) {
        fprintf(stderr, "mutation failed: %d %s\n", status, body);
        return 0;
    }
    int arrived = 0;
    struct epoll_event events[512];
    double deadline = sent + timeout_ms;
    while (arrived < count && now_ms() < deadline) {
        int ready = epoll_wait(epoll_fd, events, 512, 100);
        for (int index = 0; index < ready; index++) {
            Subscriber *subscriber = events[index].data.ptr;
            ssize_t got;
            while ((got = read(subscriber->fd, subscriber->buffer + subscriber->used,
                               sizeof subscriber->buffer - 1 - subscriber->used)) > 0) {
                subscriber->used += got;
            }
            if (!subscriber->done && complete(subscriber)) {
                subscriber->done = 1;
                subscriber->latency_ms = now_ms() - sent;
                arrived++;
            }
        }
    }
    *elapsed_ms = now_ms() - sent;
    return arrived;
}

static void usage(void) {
    fprintf(stderr,
            "usage: FanoutLoad [--port P] [--subscribers N[,N...]] [--sustained K] [--collection NAME]\n"
            "  one mutation to N held polls (default 100,1000,10000), latencies from send to complete response;\n"
            "  --sustained K: K mutations in sequence, each once all N have re-polled; deliveries per second.\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *sizes = "100,1000,10000";
    int sustained = 0;
    for (int index = 1; index < argc; index++) {
        if (!strcmp(argv[index], "--port") && index + 1 < argc) port = atoi(argv[++index]);
        else if (!strcmp(argv[index], "--subscribers") && index + 1 < argc) sizes = argv[++index];
        else if (!strcmp(argv[index], "--sustained") && index + 1 < argc) sustained = atoi(argv[++index]);
        else if (!strcmp(argv[index], "--collection") && index + 1 < argc) collection = argv[++index];
        else usage();
    }
    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);

    char list[256];
    snprintf(list, sizeof list, "%s", sizes);
    printf("%-12s %10s %10s %10s %10s %12s\n", "subscribers", "p50_ms", "p99_ms", "max_ms", "arrived",
           sustained ? "deliveries/s" : "total_ms");
    for (char *token = strtok(list, ","); token; token = strtok(NULL, ",")) {
        int count = atoi(token);
        if (count <= 0 || count > 100000) usage();
        char path[256], body[4096];
        snprintf(path, sizeof path, "/v1/collections/%s", collection);
        if (request("PUT", path, "{\"sections\":[{\"id\":\"s\"}]}", body, sizeof body) / 100 != 2 ||
            !extract(body, "version", version, sizeof version)) {
            fprintf(stderr, "cannot create the collection: %s\n", body);
            return 1;
        }
        int epoll_fd = epoll_create1(0);
        Subscriber *subscribers = calloc(count, sizeof *subscribers);
        for (int index = 0; index < count; index++) {
            subscribers[index].fd = open_connection(0);
            if (subscribers[index].fd < 0) {
                fprintf(stderr, "connection %d failed: %s\n", index, strerror(errno));
                return 1;
            }
        }
        usleep(200000);
        for (int index = 0; index < count; index++) {
            int flags = fcntl(subscribers[index].fd, F_GETFL);
            fcntl(subscribers[index].fd, F_SETFL, flags & ~O_NONBLOCK);
            send_poll(&subscribers[index]);
            fcntl(subscribers[index].fd, F_SETFL, flags);
            struct epoll_event event = {.events = EPOLLIN, .data.ptr = &subscribers[index]};
            epoll_ctl(epoll_fd, EPOLL_CTL_ADD, subscribers[index].fd, &event);
        }
        if (!wait_for_held(count, 30000)) {
            fprintf(stderr, "the server never held %d polls (it holds %ld)\n", count, held_polls());
            return 1;
        }
        int rounds = sustained > 0 ? sustained : 1;
        double *latencies = malloc(sizeof(double) * count * rounds);
        int total = 0;
        double busy_ms = 0;
        for (int round = 0; round < rounds; round++) {
            double elapsed;
            int arrived = round_trip(subscribers, count, epoll_fd, round, 15000, &elapsed);
            busy_ms += elapsed;
            for (int index = 0; index < count; index++) {
                if (subscribers[index].done == 1) latencies[total++] = subscribers[index].latency_ms;
            }
            if (arrived < count) {
                fprintf(stderr, "round %d: only %d of %d responses arrived\n", round, arrived, count);
                break;
            }
            if (round + 1 < rounds) {
                for (int index = 0; index < count; index++) send_poll(&subscribers[index]);
                if (!wait_for_held(count, 30000)) {
                    fprintf(stderr, "round %d: the polls were not held again\n", round);
                    break;
                }
            }
        }
        qsort(latencies, total, sizeof(double), compare);
        double p50 = total ? latencies[total / 2] : 0, p99 = total ? latencies[(int)(total * 0.99)] : 0;
        double max = total ? latencies[total - 1] : 0;
        printf("%-12d %10.2f %10.2f %10.2f %10d %12.0f\n", count, p50, p99, max, total,
               sustained ? total / (busy_ms / 1000) : busy_ms);
        fflush(stdout);
        for (int index = 0; index < count; index++) close(subscribers[index].fd);
        free(subscribers);
        free(latencies);
        close(epoll_fd);
        usleep(300000);
    }
    return 0;
}
