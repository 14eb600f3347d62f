/*
 * Load: the load generator of ChangeServer's benchmarks. One thread, one epoll loop, plain C, so that it costs
 * far less CPU than the server it measures on the same two cores. Loopback only; every loop is bounded in count
 * and time. Modes:
 *
 *   fanout   N subscribers hold a long poll on one collection at its current version; once /metrics reports
 *            them held, one mutation is sent and, for every subscriber, the time from the mutation's send to
 *            its complete response is recorded (p50/p99/max). --sustained K repeats it K times, each mutation
 *            sent once every subscriber has its changeset and has polled again: deliveries per second.
 *            --front PORT: the subscribers go through a cache on PORT (scripts/nginx-front.sh,
 *            scripts/varnish-front.sh) while mutations and /metrics go to the server; it also reports the
 *            origin's feed requests per mutation. --sse 1: the subscribers hold Server-Sent Events streams
 *            instead of polls (no re-poll between rounds). --server-pid PID: the server's resident memory per
 *            subscriber, and the CPU time it spent (all threads) from each mutation's send to its last delivery.
 *            --burst W (with --sustained K): W writers send K mutations in all, each as soon as its last one is
 *            acknowledged, without waiting for the subscribers; every subscriber follows until it has the last
 *            version (a poll re-polls from the version it got): deliveries (subscriber x mutation) per second
 *            from the first write to the last delivery, and the events received per subscriber and mutation
 *            (below 1 when the server coalesces what a subscriber missed). Streams are read as the server writes
 *            to a waiting stream, each event in a chunk of its own (chunk framing is not decoded).
 *   churn    polls that time out or whose clients vanish, by the hundred thousand; the server's resident
 *            memory and open descriptors before and after (--server-pid).
 *   writes   durable mutations per second (small item upserts) from 1, 16 and 64 concurrent keep-alive clients;
 *            --spread N spreads the clients over N collections (client i writes to collection i mod N).
 *   isolation  4 clients upserting single items into a small collection B, alone and then while another client
 *            replaces the whole content of a collection A of --items items back to back (PUT): B's latency and
 *            throughput in both phases, and their ratio; then the latency of reads of the list of collections
 *            and of an item of A, with A idle and while it is replaced.
 *   restart  builds a data directory of 1,000,000 items with a server it starts (--server), then times
 *            restarts: journal only, and snapshot + journal.
 *   relay    servers sharing one PostgreSQL (--ports A,B): a poll held on B, an upsert sent to A; the time from
 *            A's answer to B's delivery (p50/p99 over --count mutations), next to the same measure with the poll
 *            held on A itself (the baseline, same run).
 *
 * --ports A,B,C (writes, relay): several servers on one database; client i of `writes` goes to port i mod N.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    char buffer[16384];
    size_t used;
    int done;          /* the current round's response has arrived */
    double latency_ms; /* of the current round */
    int events;        /* --burst: events (or poll answers with changes) received */
    char since[128];   /* --burst: the version the subscriber is at */
} Subscriber;

static const char *host = "127.0.0.1";
static int port = 8080;
/* --ports: servers sharing one database (writes spreads its clients over them; relay uses the first two). */
static int ports[16];
static int port_count = 0;
static const char *collection = "fanout";
/* Whether the server under test is nginx with the nchan module (the baseline of `fanout --nchan`). */
static int nchan = 0;
static char version[128];
/* fanout: the port of a cache the subscribers go through (0: straight to the server), and SSE streams. */
static int front_port = 0;
static int sse = 0;

static double now_ms(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return spec.tv_sec * 1e3 + spec.tv_nsec / 1e6;
}

static int connect_to(int target_port, int blocking) {
    int fd = socket(AF_INET, SOCK_STREAM | (blocking ? 0 : SOCK_NONBLOCK), 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(target_port)};
    inet_pton(AF_INET, host, &address.sin_addr);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static int open_connection(int blocking) { return connect_to(port, blocking); }

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
    if (nchan) {
        char path[256];
        snprintf(path, sizeof path, "/pub/%s", collection);
        int status = request("GET", path, NULL, body, sizeof body);
        const char *field = strstr(body, "subscribers: ");
        return status == 200 && field ? strtol(field + strlen("subscribers: "), NULL, 10) : (status == 404 ? 0 : -1);
    }
    if (request("GET", "/metrics", NULL, body, sizeof body) != 200) return -1;
    const char *name = sse ? "\nchangeserver_streams_open " : "\nchangeserver_held_polls ";
    const char *line = strstr(body, name);
    return line ? strtol(line + strlen(name), NULL, 10) : -1;
}

/* The feed requests the server has answered so far (what a cache in front lets through). */
static long feed_requests(void) {
    static char body[1 << 20];
    if (request("GET", "/metrics", NULL, body, sizeof body) != 200) return -1;
    long total = 0;
    for (const char *line = strstr(body, "\nchangeserver_requests_total{"); line;
         line = strstr(line + 1, "\nchangeserver_requests_total{")) {
        const char *end = strchr(line + 1, '\n');
        const char *route = strstr(line, "route=\"/v1/collections/{name}/changes\"");
        /* The label set ends with `"} ` (the route's own `{name}` has a brace too). */
        const char *close = route ? strstr(route, "\"} ") : NULL;
        if (close && (!end || close < end)) total += strtol(close + 2, NULL, 10);
    }
    return total;
}

static int wait_for_held(long count, double timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    /* Through a cache polls are collapsed: the server holds one, and the others wait in the cache. */
    int collapsed = front_port && !sse;
    while (now_ms() < deadline) {
        if (collapsed && held_polls() >= 1) {
            usleep(2000000);
            return 1;
        }
        if (!collapsed && held_polls() >= count) return 1;
        usleep(20000);
    }
    return 0;
}

static void send_poll_since(Subscriber *subscriber, const char *version);

static void send_poll(Subscriber *subscriber) { send_poll_since(subscriber, version); }

static void send_poll_since(Subscriber *subscriber, const char *version) {
    char head[512];
    int length = nchan ? snprintf(head, sizeof head, "GET /sub/%s HTTP/1.1\r\nHost: %s\r\n\r\n", collection, host)
                 : sse ? snprintf(head, sizeof head,
                                  "GET /v1/collections/%s/changes?since=%s HTTP/1.1\r\nHost: %s\r\n"
                                  "Accept: text/event-stream\r\n\r\n",
                                  collection, version, host)
                       : snprintf(head, sizeof head,
                                  "GET /v1/collections/%s/changes?since=%s&timeout=120 HTTP/1.1\r\nHost: %s\r\n\r\n",
                                  collection, version, host);
    subscriber->used = 0;
    subscriber->done = 0;
    if (write(subscriber->fd, head, length) != length) subscriber->done = -1;
}

/* `count` subscribers on `target_port`, each with its poll or stream request sent, watched by `epoll_fd`; NULL when
   one cannot connect. */
static Subscriber *subscribe(int count, int target_port, int epoll_fd) {
    Subscriber *subscribers = calloc(count, sizeof *subscribers);
    for (int index = 0; index < count; index++) {
        subscribers[index].fd = connect_to(target_port, 1);
        if (subscribers[index].fd < 0) {
            fprintf(stderr, "connection %d failed: %s\n", index, strerror(errno));
            return NULL;
        }
        send_poll(&subscribers[index]);
        fcntl(subscribers[index].fd, F_SETFL, fcntl(subscribers[index].fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = &subscribers[index]};
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, subscribers[index].fd, &event);
    }
    return subscribers;
}

/* Whether the subscriber's buffer holds one whole response (headers and Content-Length body). */
static int complete(Subscriber *subscriber) {
    subscriber->buffer[subscriber->used] = 0;
    /* A stream: this round's event has arrived (the buffer is emptied between rounds). */
    if (sse) {
        const char *event = strstr(subscriber->buffer, "event: changes\n");
        return event && strstr(event, "\n\n");
    }
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
    snprintf(path, sizeof path, nchan ? "/pub/%s" : "/v1/collections/%s/mutations", collection);
    double sent = now_ms();
    int status = request("POST", path, ops, body, sizeof body);
    if (nchan ? status / 100 != 2 : (status != 200 || !extract(body, "version", version, sizeof version))) {
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
            /* One read per readiness when it leaves room in the buffer (the socket is drained: the epoll is
               level-triggered, so bytes that come later are reported again); a second read that would find
               nothing costs the client a system call per answer, which on one core is what it spends most on. */
            for (;;) {
                size_t room = sizeof subscriber->buffer - 1 - subscriber->used;
                got = read(subscriber->fd, subscriber->buffer + subscriber->used, room);
                if (got <= 0) break;
                subscriber->used += got;
                /* A stream's bytes before this round's event (headers, comments) are of no interest. */
                if (sse && subscriber->used > sizeof subscriber->buffer / 2 && !strstr(subscriber->buffer, "event: changes")) {
                    subscriber->used = 0;
                }
                if ((size_t)got < room) break;
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

/* Resident kilobytes and open descriptors of a process, from /proc. */
static void process_usage(int pid, long *rss_kb, long *descriptors) {
    char path[64], line[256];
    *rss_kb = -1;
    *descriptors = -1;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *status = fopen(path, "r");
    if (status) {
        while (fgets(line, sizeof line, status)) {
            if (!strncmp(line, "VmRSS:", 6)) *rss_kb = strtol(line + 6, NULL, 10);
        }
        fclose(status);
    }
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *directory = opendir(path);
    if (directory) {
        *descriptors = 0;
        struct dirent *entry;
        while ((entry = readdir(directory))) {
            if (entry->d_name[0] != '.') (*descriptors)++;
        }
        closedir(directory);
    }
}

/* The CPU time a process has used, all its threads, in nanoseconds (the first field of each thread's
   /proc/PID/task/TID/schedstat); -1 when it cannot be read. Finer than the clock ticks of /proc/PID/stat. */
static double process_cpu_ns(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return -1;
    double total = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks))) {
        if (entry->d_name[0] == '.') continue;
        char file[128];
        snprintf(file, sizeof file, "/proc/%d/task/%s/schedstat", pid, entry->d_name);
        FILE *stat = fopen(file, "r");
        if (!stat) continue;
        unsigned long long running = 0;
        if (fscanf(stat, "%llu", &running) == 1) total += (double)running;
        fclose(stat);
    }
    closedir(tasks);
    return total;
}

static int wait_for_no_held(double timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        if (held_polls() == 0) return 1;
        usleep(50000);
    }
    return 0;
}

static int create_collection(const char *sections_json) {
    char path[256], body[4096];
    snprintf(path, sizeof path, "/v1/collections/%s", collection);
    int status = request("PUT", path, sections_json, body, sizeof body);
    if (status / 100 != 2 || !extract(body, "version", version, sizeof version)) {
        fprintf(stderr, "cannot create the collection: %d %s\n", status, body);
        return 0;
    }
    return 1;
}

/* Closes the subscribers' connections, frees them, and waits until the server holds none of them. */
static void unsubscribe(Subscriber *subscribers, int count, int epoll_fd) {
    for (int index = 0; index < count; index++) close(subscribers[index].fd);
    free(subscribers);
    close(epoll_fd);
    wait_for_no_held(10000);
}

static int fanout(const char *sizes, int sustained, int server_pid) {
    char list[256];
    snprintf(list, sizeof list, "%s", sizes);
    printf("%-12s %10s %10s %10s %10s %12s\n", "subscribers", "p50_ms", "p99_ms", "max_ms", "arrived",
           sustained ? "deliveries/s" : "total_ms");
    for (char *token = strtok(list, ","); token; token = strtok(NULL, ",")) {
        int count = atoi(token);
        if (count <= 0 || count > 100000) return 2;
        static char channel[128];
        if (nchan) {
            /* A fresh channel per run, so that no earlier message reaches the new subscribers. */
            snprintf(channel, sizeof channel, "fanout%d", count);
            collection = channel;
        } else if (!create_collection("{\"sections\":[{\"id\":\"s\"}]}")) {
            return 1;
        }
        int epoll_fd = epoll_create1(0);
        long rss_before = -1, rss_after = -1, descriptors;
        if (server_pid > 0) process_usage(server_pid, &rss_before, &descriptors);
        Subscriber *subscribers = subscribe(count, front_port ? front_port : port, epoll_fd);
        if (!subscribers) return 1;
        if (!wait_for_held(count, 30000)) {
            fprintf(stderr, "the server never held %d polls (it holds %ld)\n", count, held_polls());
            return 1;
        }
        if (server_pid > 0) {
            usleep(500000);
            process_usage(server_pid, &rss_after, &descriptors);
        }
        for (int index = 0; index < count; index++) subscribers[index].used = subscribers[index].done = 0;
        long requests_before = feed_requests();
        int rounds = sustained > 0 ? sustained : 1;
        double *latencies = malloc(sizeof(double) * count * rounds);
        int total = 0;
        double delivering_ms = 0, started = now_ms(), server_cpu_ns = 0;
        for (int round = 0; round < rounds; round++) {
            double elapsed;
            double cpu_before = server_pid > 0 ? process_cpu_ns(server_pid) : -1;
            int arrived = round_trip(subscribers, count, epoll_fd, round, 15000, &elapsed);
            double cpu_after = server_pid > 0 ? process_cpu_ns(server_pid) : -1;
            if (cpu_before >= 0 && cpu_after >= 0) server_cpu_ns += cpu_after - cpu_before;
            delivering_ms += elapsed;
            for (int index = 0; index < count; index++) {
                if (subscribers[index].done == 1) latencies[total++] = subscribers[index].latency_ms;
            }
            if (arrived < count) {
                fprintf(stderr, "round %d: only %d of %d responses arrived\n", round, arrived, count);
                break;
            }
            if (round + 1 < rounds && sse) {
                for (int index = 0; index < count; index++) subscribers[index].used = subscribers[index].done = 0;
            } else if (round + 1 < rounds) {
                for (int index = 0; index < count; index++) send_poll(&subscribers[index]);
                if (!wait_for_held(count, 30000)) {
                    fprintf(stderr, "round %d: the polls were not held again\n", round);
                    break;
                }
            }
        }
        double wall_ms = now_ms() - started;
        qsort(latencies, total, sizeof(double), compare);
        double p50 = total ? latencies[total / 2] : 0, p99 = total ? latencies[(int)(total * 0.99)] : 0;
        double max = total ? latencies[total - 1] : 0;
        printf("%-12d %10.2f %10.2f %10.2f %10d %12.0f\n", count, p50, p99, max, total,
               sustained ? total / (delivering_ms / 1000) : delivering_ms);
        if (front_port) {
            printf("  through the cache on port %d: %.2f origin feed requests per mutation\n", front_port,
                   (double)(feed_requests() - requests_before) / rounds);
        }
        if (server_pid > 0 && total > 0) {
            /* From the mutation's send to the last delivery: the server's whole work for it, whatever the client's
               pace (on one core the client reading the answers can take longer than the server writing them). */
            printf("  server CPU: %.2f ms per mutation, %.2f us per delivery\n", server_cpu_ns / 1e6 / rounds,
                   server_cpu_ns / 1e3 / total);
        }
        if (server_pid > 0 && rss_before >= 0 && rss_after >= 0) {
            printf("  server memory: %.1f KiB per %s held\n", (double)(rss_after - rss_before) / count,
                   sse ? "stream" : "poll");
        }
        if (sustained) {
            printf("  %d rounds: %.0f deliveries/s counting only mutation-to-last-delivery time, %.0f/s over the "
                   "whole run (re-polls and /metrics checks included)\n",
                   rounds, total / (delivering_ms / 1000), total / (wall_ms / 1000));
        }
        fflush(stdout);
        free(latencies);
        unsubscribe(subscribers, count, epoll_fd);
    }
    return 0;
}

/* Polls that time out (half of them) or whose clients vanish right after asking (the other half). */
static int churn(int polls, int batch, int server_pid) {
    if (!create_collection("{\"sections\":[{\"id\":\"s\"}]}")) return 1;
    long rss_before, fds_before, rss_after, fds_after;
    process_usage(server_pid, &rss_before, &fds_before);
    int *fds = malloc(sizeof(int) * batch);
    int done = 0;
    double started = now_ms();
    while (done < polls && now_ms() - started < 600000) {
        int count = polls - done < batch ? polls - done : batch;
        char head[512];
        int length = snprintf(head, sizeof head,
                              "GET /v1/collections/%s/changes?since=%s&timeout=1 HTTP/1.1\r\nHost: %s\r\n\r\n",
                              collection, version, host);
        for (int index = 0; index < count; index++) {
            fds[index] = open_connection(1);
            if (fds[index] >= 0 && write(fds[index], head, length) != length) {
                close(fds[index]);
                fds[index] = -1;
            }
            if (index % 2 == 1 && fds[index] >= 0) {
                close(fds[index]);
                fds[index] = -1;
            }
        }
        for (int index = 0; index < count; index++) {
            if (fds[index] < 0) continue;
            struct timeval timeout = {.tv_sec = 5};
            setsockopt(fds[index], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
            char buffer[4096];
            (void)!read(fds[index], buffer, sizeof buffer);
            close(fds[index]);
        }
        done += count;
        if (!wait_for_no_held(10000)) fprintf(stderr, "polls are still held after a batch\n");
        if (done == batch) process_usage(server_pid, &rss_before, &fds_before);
    }
    wait_for_no_held(10000);
    usleep(500000);
    process_usage(server_pid, &rss_after, &fds_after);
    printf("polls: %d (half timed out, half vanished) in %.1f s\n", done, (now_ms() - started) / 1000);
    printf("server after the first batch of %d: %ld kB resident, %ld descriptors\n", batch, rss_before, fds_before);
    printf("server after all:                  %ld kB resident, %ld descriptors\n", rss_after, fds_after);
    free(fds);
    return 0;
}

typedef struct {
    int fd;
    char buffer[8192];
    size_t used;
    long sequence;
    double sent;
} Writer;

/* Collections the writers spread over: client i writes to `<collection>-<i mod spread>` (just `<collection>` for 1). */
static int spread = 1;

static void collection_of(int client, char *name, size_t capacity) {
    if (spread <= 1) snprintf(name, capacity, "%s", collection);
    else snprintf(name, capacity, "%s-%d", collection, client % spread);
}

static void send_write(Writer *writer, int client) {
    char request_text[512], json[128], name[160];
    collection_of(client, name, sizeof name);
    int json_length = snprintf(json, sizeof json, "{\"data\":{\"n\":%ld}}", writer->sequence);
    int length = snprintf(request_text, sizeof request_text,
                          "PUT /v1/collections/%s/items/c%d-%ld HTTP/1.1\r\nHost: %s\r\n"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                          name, client, writer->sequence, host, json_length, json);
    writer->used = 0;
    writer->sent = now_ms();
    writer->sequence++;
    if (write(writer->fd, request_text, length) != length) writer->fd = -1;
}

typedef struct {
    double per_second, p50_ms, p99_ms;
    long errors;
} WriteResult;

/* N keep-alive clients, each sending its next upsert when the previous is answered, for `seconds`. */
static int measure_writes(int count, double seconds, WriteResult *result) {
    int epoll_fd = epoll_create1(0);
    Writer *writers = calloc(count, sizeof *writers);
    size_t capacity = 1 << 22, recorded = 0;
    double *latencies = malloc(sizeof(double) * capacity);
    long errors = 0;
    for (int index = 0; index < count; index++) {
        if (port_count) port = ports[index % port_count];
        writers[index].fd = open_connection(1);
        if (writers[index].fd < 0) return 0;
        fcntl(writers[index].fd, F_SETFL, fcntl(writers[index].fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = index};
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, writers[index].fd, &event);
        send_write(&writers[index], index);
    }
    if (port_count) port = ports[0];
    double started = now_ms(), deadline = started + seconds * 1000;
    long completed = 0;
    struct epoll_event events[256];
    while (now_ms() < deadline) {
        int ready = epoll_wait(epoll_fd, events, 256, 100);
        for (int index = 0; index < ready; index++) {
            Writer *writer = &writers[events[index].data.u32];
            ssize_t got;
            while ((got = read(writer->fd, writer->buffer + writer->used, sizeof writer->buffer - 1 - writer->used)) >
                   0) {
                writer->used += got;
            }
            Subscriber view;
            memcpy(view.buffer, writer->buffer, writer->used);
            view.used = writer->used;
            if (!complete(&view)) continue;
            if (strncmp(writer->buffer, "HTTP/1.1 20", 11)) errors++;
            if (recorded < capacity) latencies[recorded++] = now_ms() - writer->sent;
            completed++;
            send_write(writer, events[index].data.u32);
        }
    }
    double elapsed = (now_ms() - started) / 1000;
    qsort(latencies, recorded, sizeof(double), compare);
    result->per_second = completed / elapsed;
    result->p50_ms = recorded ? latencies[recorded / 2] : 0;
    result->p99_ms = recorded ? latencies[(size_t)(recorded * 0.99)] : 0;
    result->errors = errors;
    for (int index = 0; index < count; index++) close(writers[index].fd);
    free(writers);
    free(latencies);
    close(epoll_fd);
    return 1;
}

/* With --ports: waits (up to 5 s) until every server serves `collection`, which the first one created. */
static int known_everywhere(void) {
    int first = port, known = 1;
    for (int index = 1; index < port_count; index++) {
        port = ports[index];
        char path[256];
        snprintf(path, sizeof path, "/v1/collections/%s", collection);
        double deadline = now_ms() + 5000;
        while (request("GET", path, NULL, NULL, 0) != 200 && now_ms() < deadline) usleep(2000);
        if (request("GET", path, NULL, NULL, 0) != 200) known = 0;
    }
    port = first;
    if (!known) fprintf(stderr, "collection %s did not reach every server\n", collection);
    return known;
}

/* Reads one whole response into `reader` (blocking); 0 on a closed connection or a timeout. */
static int read_response(Subscriber *reader) {
    reader->used = 0;
    while (!complete(reader)) {
        ssize_t got = read(reader->fd, reader->buffer + reader->used, sizeof reader->buffer - 1 - reader->used);
        if (got <= 0) return 0;
        reader->used += got;
    }
    return 1;
}

/* `count` rounds: a poll held on `poll_port`, an upsert sent to `write_port`; the time from the upsert's answer to
   the poll's (0 when the poll answered first). Prints p50/p99/max under `label`. */
static int relay_between(int write_port, int poll_port, int count, const char *label) {
    Subscriber poll = {0}, writer = {0};
    struct timeval timeout = {.tv_sec = 10};
    port = poll_port;
    poll.fd = open_connection(1);
    port = write_port;
    writer.fd = open_connection(1);
    if (poll.fd < 0 || writer.fd < 0) return 0;
    setsockopt(poll.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(writer.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    double *latencies = malloc(sizeof(double) * count), deadline = now_ms() + 120000;
    int done = 0;
    for (; done < count && now_ms() < deadline; done++) {
        send_poll(&poll);
        usleep(2000); /* the poll is held before the write is sent; not part of the measure */
        /* A new item every round, in every phase: an upsert that changed nothing would wake no poll. */
        static int item = 0;
        item++;
        char request_text[512], json[64];
        int json_length = snprintf(json, sizeof json, "{\"data\":%d}", item);
        int length = snprintf(request_text, sizeof request_text,
                              "PUT /v1/collections/%s/items/relay-%d HTTP/1.1\r\nHost: %s\r\n"
                              "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                              collection, item, host, json_length, json);
        if (write(writer.fd, request_text, length) != length || !read_response(&writer)) break;
        double answered = now_ms();
        if (!read_response(&poll)) break;
        double delivered = now_ms();
        char *body = strstr(poll.buffer, "\r\n\r\n");
        if (!body || !extract(body, "to", version, sizeof version)) break;
        latencies[done] = delivered > answered ? delivered - answered : 0;
    }
    close(poll.fd);
    close(writer.fd);
    if (done < count) {
        fprintf(stderr, "%s: only %d of %d rounds completed\n", label, done, count);
        free(latencies);
        return 0;
    }
    qsort(latencies, done, sizeof(double), compare);
    printf("%-34s p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms  (%d mutations)\n", label, latencies[done / 2],
           latencies[(int)(done * 0.99)], latencies[done - 1], done);
    free(latencies);
    return 1;
}

static int relay(int count) {
    if (port_count < 2) {
        fprintf(stderr, "relay needs --ports A,B\n");
        return 2;
    }
    port = ports[0];
    if (!create_collection("{\"sections\":[{\"id\":\"s\"}]}") || !known_everywhere()) return 1;
    if (!relay_between(ports[0], ports[0], count, "same server (baseline):")) return 1;
    if (!relay_between(ports[0], ports[1], count, "answer on A to delivery on B:")) return 1;
    return 0;
}

/* Creates the collections the writers of `count` clients use. */
static int create_write_collections(void) {
    const char *base = collection;
    char name[160];
    for (int index = 0; index < (spread > 1 ? spread : 1); index++) {
        collection_of(index, name, sizeof name);
        collection = name;
        int created = create_collection("{\"sections\":[{\"id\":\"s\"}]}") && known_everywhere();
        collection = base;
        if (!created) return 0;
    }
    return 1;
}

/* Durable item upserts from N keep-alive clients, each sending its next one when the previous is answered. */
static int writes(const char *sizes, double seconds) {
    char list[256];
    snprintf(list, sizeof list, "%s", sizes);
    printf("%-8s %-12s %14s %10s %10s %10s\n", "clients", "collections", "mutations/s", "p50_ms", "p99_ms", "errors");
    for (char *token = strtok(list, ","); token; token = strtok(NULL, ",")) {
        int count = atoi(token);
        if (count <= 0 || count > 10000) return 2;
        if (!create_write_collections()) return 1;
        WriteResult result;
        if (!measure_writes(count, seconds, &result)) return 1;
        printf("%-8d %-12d %14.0f %10.2f %10.2f %10ld\n", count, spread > 1 ? spread : 1, result.per_second,
               result.p50_ms, result.p99_ms, result.errors);
        fflush(stdout);
        usleep(300000);
    }
    return 0;
}

/* The body of a PUT of `items` items in sections of 1,000, every item's data set to `variant`: each replacement
   changes every item, so the server diffs the whole collection and commits a changeset that updates them all. */
static char *replacement_body(int items, int variant) {
    size_t capacity = (size_t)items * 48 + 4096, used = 0;
    char *json = malloc(capacity);
    used += snprintf(json + used, capacity - used, "{\"sections\":[");
    for (int section = 0; section * 1000 < items; section++) {
        used += snprintf(json + used, capacity - used, "%s{\"id\":\"s%d\",\"items\":[", section ? "," : "", section);
        for (int item = section * 1000; item < items && item < (section + 1) * 1000; item++) {
            used += snprintf(json + used, capacity - used, "%s{\"id\":\"a%d\",\"data\":{\"v\":%d}}",
                             item % 1000 ? "," : "", item, variant);
        }
        used += snprintf(json + used, capacity - used, "]}");
    }
    snprintf(json + used, capacity - used, "]}");
    return json;
}

/* `GET path`, one after another for `seconds` (at most 100,000 times), each on a new connection; prints the p50,
   p99 and max of their latency under `label`, and how many took over 50 ms (a stall shows in the max and that
   count: A is replaced a few times a second, so the p99 can miss it). */
static int read_latency(const char *path, double seconds, const char *label) {
    enum { limit = 100000 };
    double *latencies = malloc(sizeof(double) * limit), deadline = now_ms() + seconds * 1000;
    int done = 0;
    while (done < limit && now_ms() < deadline) {
        double start = now_ms();
        if (request("GET", path, NULL, NULL, 0) != 200) {
            fprintf(stderr, "%s: GET %s failed\n", label, path);
            free(latencies);
            return 0;
        }
        latencies[done++] = now_ms() - start;
    }
    qsort(latencies, done, sizeof(double), compare);
    int slow = 0;
    for (int index = 0; index < done; index++) slow += latencies[index] > 50;
    printf("%-34s p50 %6.2f ms  p99 %6.2f ms  max %7.2f ms  (%d reads, %d over 50 ms)\n", label, latencies[done / 2],
           latencies[(int)(done * 0.99)], latencies[done - 1], done, slow);
    free(latencies);
    return 1;
}

/* Reads that must not wait for A's diff: the list of collections (which includes A) and an item of A. */
static int isolation_reads(const char *large, double seconds, const char *when) {
    char item[256], label[64];
    snprintf(item, sizeof item, "/v1/collections/%s/items/a0", large);
    snprintf(label, sizeof label, "GET /v1/collections, %s", when);
    if (!read_latency("/v1/collections", seconds, label)) return 0;
    snprintf(label, sizeof label, "GET an item of A, %s", when);
    return read_latency(item, seconds, label);
}

/* B's upserts alone, then while a child process replaces A (of `items` items) back to back; then reads of the
   list and of A, alone and while A is replaced. */
static int isolation(int items, double seconds) {
    const char *small = collection;
    char large[160];
    snprintf(large, sizeof large, "%s-large", small);
    char *bodies[2] = {replacement_body(items, 1), replacement_body(items, 2)};
    collection = large;
    char path[256], answer[256];
    snprintf(path, sizeof path, "/v1/collections/%s", large);
    if (request("PUT", path, bodies[0], answer, sizeof answer) / 100 != 2) return 1;
    collection = small;
    if (!create_write_collections()) return 1;
    WriteResult alone, during;
    const double reading = 2;
    if (!measure_writes(4, seconds, &alone)) return 1;
    fflush(stdout);
    if (!isolation_reads(large, reading, "A idle")) return 1;
    fflush(stdout);
    pid_t replacer = fork();
    if (replacer == 0) {
        double deadline = now_ms() + (seconds + 2 + 2 * reading) * 1000;
        int replaced = 0;
        while (now_ms() < deadline) {
            if (request("PUT", path, bodies[replaced % 2 ? 0 : 1], NULL, 0) / 100 == 2) replaced++;
        }
        printf("A (%d items) replaced %d times in %.0f s\n", items, replaced, seconds + 2 + 2 * reading);
        fflush(stdout);
        _exit(0);
    }
    usleep(1000000);
    if (!measure_writes(4, seconds, &during)) return 1;
    if (!isolation_reads(large, reading, "A replaced")) return 1;
    waitpid(replacer, NULL, 0);
    printf("%-34s %12s %10s %10s %8s\n", "B, 4 clients", "upserts/s", "p50_ms", "p99_ms", "errors");
    printf("%-34s %12.0f %10.2f %10.2f %8ld\n", "alone", alone.per_second, alone.p50_ms, alone.p99_ms, alone.errors);
    printf("%-34s %12.0f %10.2f %10.2f %8ld\n", "while A is replaced back to back", during.per_second, during.p50_ms,
           during.p99_ms, during.errors);
    printf("throughput ratio (during / alone): %.2f\n", during.per_second / alone.per_second);
    free(bodies[0]);
    free(bodies[1]);
    return 0;
}

static pid_t start_server(const char *server, const char *directory, const char *snapshot_bytes) {
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        dup2(null, 1);
        execl(server, server, "--host", host, "--port", port_text, "--data-dir", directory, "--fsync", "never",
              "--snapshot-bytes", snapshot_bytes, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Milliseconds from starting the server to its first answer to /healthz; -1 if it never answers (60 s). */
static double time_to_ready(const char *server, const char *directory, const char *snapshot_bytes, pid_t *pid) {
    double started = now_ms();
    *pid = start_server(server, directory, snapshot_bytes);
    while (now_ms() - started < 60000) {
        char body[256];
        if (request("GET", "/healthz", NULL, body, sizeof body) == 200) return now_ms() - started;
        usleep(2000);
    }
    return -1;
}

static void stop_server(pid_t pid) {
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
}

static double median_restart(const char *server, const char *directory, int repetitions) {
    double times[16];
    for (int index = 0; index < repetitions; index++) {
        pid_t pid;
        times[index] = time_to_ready(server, directory, "68719476736", &pid);
        stop_server(pid);
    }
    qsort(times, repetitions, sizeof(double), compare);
    return times[repetitions / 2];
}

/* Fills a data directory with `items` items (1,000 sections), then times restarts. */
static int restart(const char *server, int items) {
    char directory[] = "/tmp/changeserver-restart-XXXXXX";
    if (!mkdtemp(directory)) return 1;
    pid_t pid;
    if (time_to_ready(server, directory, "68719476736", &pid) < 0) {
        fprintf(stderr, "the server did not start\n");
        return 1;
    }
    int sections = 1000, per_section = items / sections;
    size_t capacity = (size_t)per_section * 64 + 256;
    char *json = malloc(capacity > 65536 ? capacity : 65536);
    size_t used = snprintf(json, 64, "{\"sections\":[");
    for (int section = 0; section < sections; section++) {
        used += snprintf(json + used, 64, "%s{\"id\":\"s%d\"}", section ? "," : "", section);
    }
    snprintf(json + used, 8, "]}");
    if (!create_collection(json)) return 1;
    char path[256], body[4096];
    snprintf(path, sizeof path, "/v1/collections/%s/mutations", collection);
    double loading = now_ms();
    for (int section = 0; section < sections; section++) {
        used = snprintf(json, 128, "{\"ops\":[{\"op\":\"insertItems\",\"at\":[%d,0],\"items\":[", section);
        for (int item = 0; item < per_section; item++) {
            used += snprintf(json + used, 64, "%s{\"id\":\"i%d-%d\",\"data\":{\"n\":%d}}", item ? "," : "", section,
                             item, item);
        }
        snprintf(json + used, 8, "]}]}");
        if (request("POST", path, json, body, sizeof body) != 200) {
            fprintf(stderr, "loading failed: %s\n", body);
            return 1;
        }
    }
    printf("loaded %d items in %d sections in %.1f s\n", sections * per_section, sections, (now_ms() - loading) / 1000);
    stop_server(pid);
    printf("restart, journal only (%d records):      median %.0f ms of 3\n", sections + 1,
           median_restart(server, directory, 3));
    /* A snapshot: a threshold of 1 byte makes the next commit take one; then records after it. */
    if (time_to_ready(server, directory, "1", &pid) < 0) return 1;
    snprintf(path, sizeof path, "/v1/collections/%s/items/after-snapshot", collection);
    request("PUT", path, "{\"data\":1}", body, sizeof body);
    char snapshot[512];
    snprintf(snapshot, sizeof snapshot, "%s/snapshot.bin", directory);
    double waited = now_ms();
    while (access(snapshot, F_OK) != 0 && now_ms() - waited < 60000) usleep(10000);
    usleep(500000);
    stop_server(pid);
    if (time_to_ready(server, directory, "68719476736", &pid) < 0) return 1;
    for (int index = 0; index < 100; index++) {
        snprintf(path, sizeof path, "/v1/collections/%s/items/late-%d", collection, index);
        request("PUT", path, "{\"data\":2}", body, sizeof body);
    }
    stop_server(pid);
    printf("restart, snapshot + journal (100 records): median %.0f ms of 3\n", median_restart(server, directory, 3));
    char command[600];
    snprintf(command, sizeof command, "rm -rf %s", directory);
    free(json);
    return system(command) == 0 ? 0 : 1;
}


typedef struct {
    int first, step, mutations;
    int refused;
} BurstWriter;

/* Set when a burst ends (its deadline passed): writers send nothing more. */
static atomic_int stop_writers;

/* One mutation on a fresh connection, its answer read into a buffer of the caller's thread; the status. */
static int post_mutation(const char *path, const char *json) {
    int fd = open_connection(1);
    if (fd < 0) return -1;
    struct timeval timeout = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char head[512], response[8192];
    size_t length = strlen(json);
    int head_length = snprintf(head, sizeof head,
                               "POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                               "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                               path, host, length);
    int status = -1;
    if (write(fd, head, head_length) == head_length && write(fd, json, length) == (ssize_t)length) {
        size_t used = 0;
        ssize_t got;
        while (used < sizeof response - 1 && (got = read(fd, response + used, sizeof response - 1 - used)) > 0)
            used += got;
        response[used] = 0;
        sscanf(response, "HTTP/1.%*d %d", &status);
    }
    close(fd);
    return status;
}

static void *write_burst(void *argument) {
    BurstWriter *writer = argument;
    char ops[256], path[256];
    snprintf(path, sizeof path, "/v1/collections/%s/mutations", collection);
    for (int index = writer->first; index < writer->mutations && !atomic_load(&stop_writers); index += writer->step) {
        snprintf(ops, sizeof ops,
                 "{\"ops\":[{\"op\":\"insertItems\",\"at\":[0,0],\"items\":[{\"id\":\"b%d\",\"data\":{\"n\":%d}}]}]}",
                 index, index);
        if (post_mutation(path, ops) != 200) writer->refused++;
    }
    return NULL;
}

/* Takes what a subscriber read: whole events of a stream (counted; done at the event with id `last`), or a whole
   poll answer (done at `last`, else the next poll from the version it reached). */
static void follow(Subscriber *subscriber, const char *last) {
    subscriber->buffer[subscriber->used] = 0;
    if (sse) {
        char *start = subscriber->buffer, *end;
        size_t last_length = strlen(last);
        while ((end = strstr(start, "\n\n"))) {
            *end = 0;
            if (strstr(start, "event: changes\n")) {
                subscriber->events++;
                const char *id = strstr(start, "\nid: ");
                if (id && !strncmp(id + 5, last, last_length) && id[5 + last_length] == '\n') subscriber->done = 1;
            }
            start = end + 2;
        }
        subscriber->used -= start - subscriber->buffer;
        memmove(subscriber->buffer, start, subscriber->used);
        return;
    }
    if (!complete(subscriber)) return;
    char *body = strstr(subscriber->buffer, "\r\n\r\n");
    char to[128];
    if (!body || !extract(body, "to", to, sizeof to)) {
        subscriber->done = -1;
        return;
    }
    subscriber->events++;
    if (!strcmp(to, last)) {
        subscriber->done = 1;
        return;
    }
    snprintf(subscriber->since, sizeof subscriber->since, "%s", to);
    send_poll_since(subscriber, subscriber->since);
}

/* fanout --burst: `writers` writers send `mutations` mutations back to back while `count` subscribers follow. */
static int burst(int count, int writers, int mutations, int server_pid) {
    if (writers < 1 || writers > 64 || mutations < 1 || count < 1 || count > 100000) {
        fprintf(stderr, "--burst takes 1 to 64 writers, --sustained at least 1, 1 to 100000 subscribers\n");
        return 2;
    }
    if (!create_collection("{\"sections\":[{\"id\":\"s\"}]}")) return 1;
    char *dot = strrchr(version, '.');
    if (!dot) return 1;
    char last[128];
    snprintf(last, sizeof last, "%.*s.%lld", (int)(dot - version), version, atoll(dot + 1) + mutations);
    int epoll_fd = epoll_create1(0);
    Subscriber *subscribers = subscribe(count, port, epoll_fd);
    if (!subscribers) return 1;
    if (!wait_for_held(count, 30000)) {
        fprintf(stderr, "the server never held %d subscribers (it holds %ld)\n", count, held_polls());
        return 1;
    }
    double cpu_before = server_pid > 0 ? process_cpu_ns(server_pid) : -1;
    BurstWriter burst_writers[64];
    pthread_t threads[64];
    double started = now_ms();
    atomic_store(&stop_writers, 0);
    int running = 0;
    for (int index = 0; index < writers; index++) {
        burst_writers[running] = (BurstWriter){.first = index, .step = writers, .mutations = mutations};
        if (pthread_create(&threads[running], NULL, write_burst, &burst_writers[running]) == 0) running++;
        else fprintf(stderr, "writer %d could not start: its mutations are not sent\n", index);
    }
    double *latencies = malloc(sizeof(double) * count);
    int finished = 0, failed = 0;
    struct epoll_event events[512];
    double deadline = started + 60000;
    while (finished + failed < count && now_ms() < deadline) {
        int ready = epoll_wait(epoll_fd, events, 512, 100);
        for (int index = 0; index < ready; index++) {
            Subscriber *subscriber = events[index].data.ptr;
            size_t room = sizeof subscriber->buffer - 1 - subscriber->used;
            ssize_t got = room ? read(subscriber->fd, subscriber->buffer + subscriber->used, room) : 0;
            if (got < 0 && errno == EAGAIN) continue;
            if (!room) {
                fprintf(stderr, "subscriber %ld: an answer or event larger than its %zu-byte buffer\n",
                        (long)(subscriber - subscribers), sizeof subscriber->buffer);
                subscriber->done = -1;
            } else if (got <= 0) {
                subscriber->done = -1;
            } else {
                subscriber->used += got;
                follow(subscriber, last);
            }
            if (subscriber->done == 1) latencies[finished++] = now_ms() - started;
            if (subscriber->done == -1) failed++;
            /* A subscriber that is done is not read again: its connection would be reported ready for ever. */
            if (subscriber->done) epoll_ctl(epoll_fd, EPOLL_CTL_DEL, subscriber->fd, NULL);
        }
    }
    double elapsed = now_ms() - started;
    double cpu_after = server_pid > 0 ? process_cpu_ns(server_pid) : -1;
    atomic_store(&stop_writers, 1);
    int refused = 0;
    for (int index = 0; index < running; index++) {
        pthread_join(threads[index], NULL);
        refused += burst_writers[index].refused;
    }
    long received = 0;
    for (int index = 0; index < count; index++) received += subscribers[index].events;
    qsort(latencies, finished, sizeof(double), compare);
    if (finished) elapsed = latencies[finished - 1];
    printf("%-12s %8s %10s %10s %10s %14s %10s\n", "subscribers", "writers", "p50_ms", "p99_ms", "done",
           "deliveries/s", "events");
    printf("%-12d %8d %10.2f %10.2f %10d %14.0f %10ld\n", count, writers, finished ? latencies[finished / 2] : 0,
           finished ? latencies[(int)(finished * 0.99)] : 0, finished, (double)finished * mutations / (elapsed / 1000),
           received);
    printf("  %d mutations to each of %d subscribers that finished: %.0f deliveries (subscriber x mutation) per second,"
           " from the first write to the last delivery; %.2f events per subscriber and mutation\n", mutations, finished,
           (double)finished * mutations / (elapsed / 1000), (double)received / count / mutations);
    if (cpu_before >= 0 && cpu_after >= 0 && finished)
        printf("  server CPU: %.2f us per delivery\n", (cpu_after - cpu_before) / 1e3 / finished / mutations);
    if (refused || failed) fprintf(stderr, "%d mutations refused, %d subscribers failed\n", refused, failed);
    fflush(stdout);
    free(latencies);
    unsubscribe(subscribers, count, epoll_fd);
    return refused || failed || finished < count ? 1 : 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: Load MODE [--host 127.0.0.1] [--port 8080] [--collection NAME] [options]\n"
            "  fanout  [--subscribers 100,1000,10000] [--sustained K] [--nchan 1: the server is nginx + nchan]\n"
            "          [--front PORT: through a cache] [--sse 1: event streams] [--server-pid PID: memory, CPU]\n"
            "          [--burst W --sustained K: W writers send K mutations back to back]\n"
            "  churn   --server-pid PID [--polls 100000] [--batch 5000]\n"
            "  writes  [--connections 1,16,64] [--seconds 5] [--spread N: over N collections]\n"
            "  isolation [--items 300000] [--seconds 5]\n"
            "  restart --server PATH/TO/ChangeServer [--items 1000000]   (starts its own server on --port)\n"
            "  relay   --ports A,B [--count 1000]   (servers on one PostgreSQL)\n"
            "  --ports A,B,C   writes: client i goes to port i mod N\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *mode = argv[1];
    const char *sizes = NULL, *server = NULL;
    int sustained = 0, writers = 0, polls = 100000, batch = 5000, server_pid = 0, items = 0, count = 1000;
    double seconds = 5;
    for (int index = 2; index < argc; index++) {
        const char *option = argv[index], *value = index + 1 < argc ? argv[index + 1] : NULL;
        if (!value) usage();
        index++;
        if (!strcmp(option, "--host")) host = value;
        else if (!strcmp(option, "--port")) port = atoi(value);
        else if (!strcmp(option, "--collection")) collection = value;
        else if (!strcmp(option, "--subscribers") || !strcmp(option, "--connections")) sizes = value;
        else if (!strcmp(option, "--sustained")) sustained = atoi(value);
        else if (!strcmp(option, "--burst")) writers = atoi(value);
        else if (!strcmp(option, "--nchan")) nchan = atoi(value);
        else if (!strcmp(option, "--front")) front_port = atoi(value);
        else if (!strcmp(option, "--sse")) sse = atoi(value);
        else if (!strcmp(option, "--polls")) polls = atoi(value);
        else if (!strcmp(option, "--batch")) batch = atoi(value);
        else if (!strcmp(option, "--server-pid")) server_pid = atoi(value);
        else if (!strcmp(option, "--seconds")) seconds = atof(value);
        else if (!strcmp(option, "--server")) server = value;
        else if (!strcmp(option, "--items")) items = atoi(value);
        else if (!strcmp(option, "--spread")) spread = atoi(value);
        else if (!strcmp(option, "--count")) count = atoi(value);
        else if (!strcmp(option, "--ports")) {
            char list[256];
            snprintf(list, sizeof list, "%s", value);
            for (char *token = strtok(list, ","); token && port_count < 16; token = strtok(NULL, ","))
                ports[port_count++] = atoi(token);
            if (port_count) port = ports[0];
        }
        else usage();
    }
    if (strncmp(host, "127.", 4)) {
        fprintf(stderr, "Load only targets IPv4 loopback addresses (127.x.x.x)\n");
        return 2;
    }
    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(mode, "fanout") && writers && (front_port || nchan)) {
        fprintf(stderr, "--burst goes straight to the server: it takes no --front or --nchan\n");
        return 2;
    }
    if (!strcmp(mode, "fanout") && writers) return burst(sizes ? atoi(sizes) : 10000, writers, sustained ? sustained : 100, server_pid);
    if (!strcmp(mode, "fanout")) return fanout(sizes ? sizes : "100,1000,10000", sustained, server_pid);
    if (!strcmp(mode, "churn") && server_pid > 0 && batch > 0) return churn(polls, batch, server_pid);
    if (!strcmp(mode, "writes")) return writes(sizes ? sizes : "1,16,64", seconds);
    if (!strcmp(mode, "relay") && count > 0 && count <= 100000) return relay(count);
    if (!strcmp(mode, "restart") && server && (items == 0 || items >= 1000)) return restart(server, items ? items : 1000000);
    if (!strcmp(mode, "isolation") && items >= 0) return isolation(items ? items : 300000, seconds);
    usage();
}
