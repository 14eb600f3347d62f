/*
 * BareHTTPD writes: the floor of the durable-writes benchmark (scripts/bench-isolation.sh, "Benchmarks" in the
 * README): what a durable write through libmicrohttpd costs on this machine, whatever a server does with it.
 * LOOPS event loops, each a daemon in MHD_USE_EPOLL mode on a listening socket of its own (SO_REUSEPORT) driven by
 * an epoll loop of its own, as ChangeServer's are; every request's body appended to one file by a syncer thread
 * that writes and fdatasyncs a whole batch (group commit, with zeros written ahead as in journal format 2) while the
 * request waits suspended; resumed by its loop, it is answered 201 with ChangeServer's answer to an upsert (310
 * bytes, a little more than the 275 or so of the benchmark's upserts). No parsing, routing, collections, checksums,
 * changesets, logs or metrics: ChangeServer's rate over this one's, in the same run, is the share it reaches of what
 * the machine allows. Loopback only.
 *
 *   BareHTTPD writes PORT FILE [LOOPS]
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MAX_LOOPS = 8, BODY_CAPACITY = 512, ZEROS = 1 << 20 };

typedef struct {
    struct MHD_Daemon *daemon;
    int epoll, wake;
    /* Connections whose bodies are on disk, to be resumed by this loop's thread. */
    pthread_mutex_t lock;
    struct MHD_Connection **resumable;
    size_t resumable_count, resumable_capacity;
} Loop;

typedef struct {
    Loop *loop;
    struct MHD_Connection *connection;
    int submitted;
    size_t used;
    char body[BODY_CAPACITY];
} Request;

static Loop loops[MAX_LOOPS];
/* ChangeServer's answer to an upsert that creates an item and its collection's default section, byte for byte. */
static const char answer[] =
    "{\"collection\":\"many-1\",\"version\":\"MWY2SsjYbVvD.2\",\"changes\":{\"from\":\"MWY2SsjYbVvD.1\","
    "\"to\":\"MWY2SsjYbVvD.2\",\"sections\":{\"deleted\":[],\"inserted\":[{\"index\":0,\"id\":\"default\","
    "\"data\":null,\"items\":[{\"id\":\"c1-1\",\"data\":{\"n\":1}}]}],\"moved\":[],\"updated\":[]},"
    "\"items\":{\"deleted\":[],\"inserted\":[],\"moved\":[],\"updated\":[]}}}";

/* The batch the syncer writes next: the bodies, and the requests waiting for them. */
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t batch_ready = PTHREAD_COND_INITIALIZER;
static char *batch;
static size_t batch_used, batch_capacity;
static Request **waiting;
static size_t waiting_count, waiting_capacity;
static int journal;

static void *grow(void *array, size_t *capacity, size_t needed, size_t size) {
    if (needed <= *capacity) return array;
    while (*capacity < needed) *capacity = *capacity ? *capacity * 2 : 64;
    void *grown = realloc(array, *capacity * size);
    if (!grown) abort();
    return grown;
}

static void *syncer(void *unused) {
    (void)unused;
    static char zeros[ZEROS];
    char *bytes = NULL;
    Request **requests = NULL;
    size_t bytes_capacity = 0, requests_capacity = 0;
    off_t offset = 0, zeroed = 0;
    for (;;) {
        pthread_mutex_lock(&batch_lock);
        while (waiting_count == 0) pthread_cond_wait(&batch_ready, &batch_lock);
        size_t length = batch_used, count = waiting_count;
        bytes = grow(bytes, &bytes_capacity, length, 1);
        requests = grow(requests, &requests_capacity, count, sizeof *requests);
        if (length > 0) memcpy(bytes, batch, length);
        memcpy(requests, waiting, count * sizeof *requests);
        batch_used = waiting_count = 0;
        pthread_mutex_unlock(&batch_lock);
        if (pwrite(journal, bytes, length, offset) != (ssize_t)length) abort();
        offset += length;
        /* Zeros after the data, 1 to 2 chunks ahead of its end, as FileJournal.zeroAhead keeps them. */
        if (offset > zeroed - ZEROS / 2) {
            off_t start = offset > zeroed ? offset : zeroed, target = (offset / ZEROS + 2) * ZEROS;
            for (off_t at = start; at < target;) {
                size_t chunk = (size_t)(target - at) < sizeof zeros ? (size_t)(target - at) : sizeof zeros;
                if (pwrite(journal, zeros, chunk, at) != (ssize_t)chunk) abort();
                at += chunk;
            }
            zeroed = target;
        }
        if (fdatasync(journal) != 0) abort();
        int woken[MAX_LOOPS] = {0};
        for (size_t index = 0; index < count; index++) {
            Loop *loop = requests[index]->loop;
            pthread_mutex_lock(&loop->lock);
            loop->resumable = grow(loop->resumable, &loop->resumable_capacity, loop->resumable_count + 1,
                                   sizeof *loop->resumable);
            loop->resumable[loop->resumable_count++] = requests[index]->connection;
            pthread_mutex_unlock(&loop->lock);
            woken[loop - loops] = 1;
        }
        for (int index = 0; index < MAX_LOOPS; index++) {
            uint64_t one = 1;
            if (woken[index] && write(loops[index].wake, &one, sizeof one) != sizeof one) abort();
        }
    }
    return NULL;
}

/* As ChangeServer does: the first call carries the headers, the next ones the body, the last one (no data) submits
   the body and suspends; the call after the resume answers. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **context) {
    (void)url, (void)method, (void)version;
    Request *request = *context;
    if (!request) {
        request = calloc(1, sizeof *request);
        if (!request) return MHD_NO;
        request->loop = cls;
        request->connection = connection;
        *context = request;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t room = BODY_CAPACITY - request->used, taken = *upload_size < room ? *upload_size : room;
        memcpy(request->body + request->used, upload, taken);
        request->used += taken;
        *upload_size = 0;
        return MHD_YES;
    }
    if (!request->submitted) {
        request->submitted = 1;
        pthread_mutex_lock(&batch_lock);
        if (request->used > 0) {
            batch = grow(batch, &batch_capacity, batch_used + request->used, 1);
            memcpy(batch + batch_used, request->body, request->used);
            batch_used += request->used;
        }
        waiting = grow(waiting, &waiting_capacity, waiting_count + 1, sizeof *waiting);
        waiting[waiting_count++] = request;
        pthread_cond_signal(&batch_ready);
        pthread_mutex_unlock(&batch_lock);
        MHD_suspend_connection(connection);
        return MHD_YES;
    }
    struct MHD_Response *response =
        MHD_create_response_from_buffer(sizeof answer - 1, (void *)answer, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(response, "Content-Type", "application/json; charset=utf-8");
    MHD_add_response_header(response, "ETag", "\"MWY2SsjYbVvD.2\"");
    enum MHD_Result result = MHD_queue_response(connection, 201, response);
    MHD_destroy_response(response);
    return result;
}

static void completed(void *cls, struct MHD_Connection *connection, void **context,
                      enum MHD_RequestTerminationCode code) {
    (void)cls, (void)connection, (void)code;
    free(*context);
    *context = NULL;
}

static void *run_loop(void *argument) {
    Loop *loop = argument;
    struct epoll_event events[8];
    for (;;) {
        MHD_UNSIGNED_LONG_LONG timeout = 1000;
        int wait = MHD_get_timeout(loop->daemon, &timeout) == MHD_YES && timeout < 1000 ? (int)timeout : 1000;
        int ready = epoll_wait(loop->epoll, events, 8, wait);
        for (int index = 0; index < ready; index++) {
            if (events[index].data.fd != loop->wake) continue;
            uint64_t counter;
            if (read(loop->wake, &counter, sizeof counter) < 0) continue;
            pthread_mutex_lock(&loop->lock);
            for (size_t resumed = 0; resumed < loop->resumable_count; resumed++) {
                MHD_resume_connection(loop->resumable[resumed]);
            }
            loop->resumable_count = 0;
            pthread_mutex_unlock(&loop->lock);
        }
        MHD_run(loop->daemon);
    }
    return NULL;
}

int run_writes(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: BareHTTPD writes PORT FILE [LOOPS]\n");
        return 2;
    }
    int count = argc == 5 ? atoi(argv[4]) : 2;
    if (count < 1 || count > MAX_LOOPS) return 2;
    journal = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (journal < 0) return 1;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* SO_REUSEPORT would let this share the port with a server left running, and measure that one too. */
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return 1;
    if (connect(probe, (struct sockaddr *)&address, sizeof address) == 0) {
        fprintf(stderr, "BareHTTPD: another process listens on port %s\n", argv[2]);
        return 1;
    }
    close(probe);
    for (int index = 0; index < count; index++) {
        Loop *loop = &loops[index];
        int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), on = 1;
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
        if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
            listen(listener, 1024) != 0) {
            perror("BareHTTPD: cannot listen");
            return 1;
        }
        pthread_mutex_init(&loop->lock, NULL);
        loop->daemon = MHD_start_daemon(
            MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, handle, loop, MHD_OPTION_LISTEN_SOCKET, listener,
            MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_CONNECTION_LIMIT, 30000u,
            MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)8192, MHD_OPTION_END);
        if (!loop->daemon) return 1;
        loop->epoll = epoll_create1(EPOLL_CLOEXEC);
        loop->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(loop->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        struct epoll_event daemon_event = {.events = EPOLLIN, .data.fd = info->epoll_fd};
        struct epoll_event wake_event = {.events = EPOLLIN, .data.fd = loop->wake};
        epoll_ctl(loop->epoll, EPOLL_CTL_ADD, info->epoll_fd, &daemon_event);
        epoll_ctl(loop->epoll, EPOLL_CTL_ADD, loop->wake, &wake_event);
    }
    pthread_t thread;
    pthread_create(&thread, NULL, syncer, NULL);
    for (int index = 1; index < count; index++) pthread_create(&thread, NULL, run_loop, &loops[index]);
    run_loop(&loops[0]);
    return 0;
}
