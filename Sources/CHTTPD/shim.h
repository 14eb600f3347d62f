#ifndef CHTTPD_SHIM_H
#define CHTTPD_SHIM_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <malloc.h>
#include <microhttpd.h>

/* MHD_start_daemon and MHD_get_daemon_info are variadic, which Swift cannot call: these wrappers fix
   the option list the server uses. */

typedef size_t (*chttpd_unescape_callback)(void *cls, struct MHD_Connection *connection, char *s);

/* Called with a request's target as it came, before libmicrohttpd splits off its query (MHD_OPTION_URI_LOG_CALLBACK);
   what it returns becomes the request's context, so it returns NULL. */
typedef void *(*chttpd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/* Starts a daemon on an already listening socket, driven by the caller's own loop (no internal thread). */
static inline struct MHD_Daemon *chttpd_start_daemon(unsigned int flags, int listen_fd,
                                                     MHD_AccessHandlerCallback handler, void *handler_cls,
                                                     MHD_RequestCompletedCallback completed, void *completed_cls,
                                                     unsigned int connection_limit, unsigned int connection_timeout,
                                                     size_t connection_memory_limit,
                                                     unsigned int per_address_limit,
                                                     chttpd_unescape_callback unescape,
                                                     MHD_NotifyConnectionCallback notify_connection,
                                                     void *notify_connection_cls,
                                                     chttpd_uri_log_callback uri_log, void *uri_log_cls) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_connection_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_END);
}

/* The daemon's epoll descriptor, or -1. */
static inline int chttpd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}

/* The socket of a connection, or -1: watched for hang-up while its request is held. */
static inline int chttpd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/* Gives a connection a timeout of its own, in seconds without activity (MHD_set_connection_option is variadic).
   A connection whose timeout differs from the daemon's moves to MHD's list of such connections, which MHD_run
   visits whole on every pass. */
static inline int chttpd_set_connection_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    return MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds) == MHD_YES;
}

/* Bytes of the request line and headers of the connection's current request, as MHD counted them, or -1. */
static inline long long chttpd_request_header_size(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? -1 : (long long)info->header_size;
}

/* Sends a response as an HTTP/1.0 server would: not chunked, the connection closed after it. For the answer to a
   `HEAD` of a stream: libmicrohttpd 0.9.75 sends a chunked response's last chunk even to a `HEAD`, and those
   five bytes would be read as the start of the next answer on a kept connection. */
static inline int chttpd_response_unchunked(struct MHD_Response *response) {
    return MHD_set_response_options(response, MHD_RF_HTTP_1_0_SERVER, MHD_RO_END) == MHD_YES;
}

/* The connection's socket context (set when MHD reports it started), or NULL. */
static inline void *chttpd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/* Copies the client's address into `address` (capacity `capacity`); returns its length, or 0. */
static inline socklen_t chttpd_client_address(struct MHD_Connection *connection, struct sockaddr_storage *address) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) return 0;
    socklen_t length = info->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                       : info->client_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : 0;
    if (length) memcpy(address, info->client_addr, length);
    return length;
}

/* Bytes a TCP socket has received in all (`tcpi_bytes_received` of the kernel's struct tcp_info, linux/tcp.h,
   at offset 128 since Linux 4.1; glibc's copy of the struct stops before it), or -1. */
static inline long long chttpd_bytes_received(int fd) {
    unsigned char info[256];
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, 11 /* TCP_INFO */, info, &length) != 0 || length < 136) return -1;
    unsigned long long received;
    memcpy(&received, info + 128, sizeof received);
    return (long long)received;
}

/* Makes a listening TCP socket drop the SYNs that would begin new connections (a classic BPF socket filter, which
   sees the TCP header at offset 0: a segment whose flags hold SYN without ACK is dropped) and take every other
   segment, so that the handshakes already under way complete into its queue: closing a listener resets the
   connections in its queue, and those that came after its last accept were reset, their requests sent. A client
   whose SYN is dropped sends it again a second later, and is then refused by the closed listener (or taken by
   another of the port's listeners still open). Returns setsockopt's result. */
static inline int chttpd_drop_new_connections(int fd) {
    struct chttpd_bpf_instruction { uint16_t code; uint8_t jump_true, jump_false; uint32_t constant; };
    /* ld byte [13] (the flags); and #0x12 (SYN | ACK); jeq #0x02 (SYN alone) ? ret #0 (drop) : ret #-1 (take). */
    static const struct chttpd_bpf_instruction program[] = {
        {0x30, 0, 0, 13}, {0x54, 0, 0, 0x12}, {0x15, 0, 1, 0x02}, {0x06, 0, 0, 0}, {0x06, 0, 0, 0xFFFFFFFF},
    };
    struct { unsigned short length; const struct chttpd_bpf_instruction *instructions; } filter = {5, program};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &filter, sizeof filter);
}

/* Bytes waiting unread in a socket's receive queue (FIONREAD), or -1. */
static inline long long chttpd_unread_bytes(int fd) {
    int count = 0;
    return ioctl(fd, FIONREAD, &count) == 0 ? count : -1;
}

/* Whether a request header line is one libmicrohttpd 0.9.75 misreads, which the server refuses (`400`):
   - a name with a character that no name has (RFC 9110 §5.1: a token), such as a space before the colon
     (`If-Match : "a"`, which RFC 9112 §5.1 says must be refused) or at the start of the first header line: this
     libmicrohttpd keeps the space in the name (its check is on only at a strictness it is never run with), so the
     header would go unread;
   - a line folded onto the next (obs-fold, RFC 9112 §5.2: a line that starts with a space or a tab), whose
     continuation libmicrohttpd appends to the header's name, not to its value: a folded `If-Match` or
     `If-None-Match` would be lost, and a folded `Content-Length` would let the body be read as the next request.
   libmicrohttpd parses a line in place in its read buffer: the name, the NUL it wrote over the colon, the spaces
   and tabs it skipped, the value, one NUL for each of the line's CR and LF; then the next line, of which a
   continuation starts with a space or a tab. To append a continuation it copies the name to a block of its own
   (then the value no longer follows the name), or, when the name ends right at the end of its memory's used part,
   grows it in place over the colon, the spaces and as much of the value as the continuation needs (then the value
   starts before the name's new end, or, when the continuation fits where the colon and spaces were, the
   continuation line still follows the value). `end` is where the request's header lines end (their last NUL);
   every pointer compared lies in the connection's memory, one block, so every byte between them is there. */
static inline int chttpd_header_is_misread(const char *key, const char *value, const char *end) {
    if (key == NULL || value == NULL) return 0;
    size_t length = strlen(key);
    if (length == 0) return 1;
    for (size_t index = 0; index < length; index++) {
        unsigned char byte = (unsigned char)key[index];
        int token = (byte >= '0' && byte <= '9') || (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z')
                    || (byte != 0 && strchr("!#$%&'*+-.^_`|~", byte) != NULL);
        if (!token) return 1;
    }
    const char *after_name = key + length + 1;
    if (value < after_name) return 1;
    for (const char *byte = after_name; byte < value; byte++) {
        if (*byte != ' ' && *byte != '\t') return 1;
    }
    if (end == NULL) return 0;
    const char *after_value = value + strlen(value);
    for (int terminators = 0; terminators < 2 && after_value < end && *after_value == '\0'; terminators++) {
        after_value++;
    }
    return after_value < end && (*after_value == ' ' || *after_value == '\t');
}

/* Where the header lines of a request end: `method` (libmicrohttpd's pointer to the request line, the start of
   its read buffer) plus the bytes of the request line and header lines libmicrohttpd counted; NULL if unknown. */
static inline const char *chttpd_header_end(struct MHD_Connection *connection, const char *method) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? NULL : method + info->header_size;
}

/* Past a header line's value and the one or two NULs libmicrohttpd wrote over its CR and LF; NULL if unknown. */
static inline const char *chttpd_after_line(const char *value, const char *end) {
    if (value == NULL || end == NULL) return NULL;
    const char *after = value + strlen(value);
    for (int terminators = 0; terminators < 2 && after < end && *after == '\0'; terminators++) after++;
    return after;
}

/* `chttpd_header_is_misread`, and whether the line before this one (which ended at `*next`, NULL for none) held a
   NUL in its value; then `*next` is set past this line. Lines are walked in order (libmicrohttpd lists them so,
   each name where its line starts).
   A value that holds a NUL (RFC 9110 §5.5: refuse it, or read the NUL as a space) reads as cut at the NUL, and
   what followed is lost: `If-None-Match: "x.1"<NUL>, *` read as `"x.1"`, and a create-only write went through. The
   line's rest then stands between its value's end and the next line's name. */
static inline int chttpd_header_line_is_misread(const char *key, const char *value, const char *end,
                                                const char **next) {
    int misread = chttpd_header_is_misread(key, value, end);
    if (*next != NULL && key != *next) misread = 1;
    *next = chttpd_after_line(value, end);
    return misread;
}

/* Whether the last header line (which ended at `next`) held a NUL in its value: the blank line's NULs, or the end
   of the header lines, follow it otherwise. */
static inline int chttpd_last_header_line_is_misread(const char *next, const char *end) {
    return next != NULL && end != NULL && next < end && *next != '\0';
}

/* The lines of two request headers, counted in one walk (names compared without case, as HTTP names are): a
   list header may come as several lines (RFC 9110 §5.3), and Host must come as one (RFC 9112 §3.2); and the
   header lines libmicrohttpd misread (`chttpd_header_is_misread`). */
struct chttpd_header_counts {
    const char *first;
    const char *second;
    const char *end;
    unsigned int lines[2];
    unsigned int misread;
    /* Where the line after the last one seen starts: past its value and the NULs written over its CR and LF. */
    const char *next;
};



static inline enum MHD_Result chttpd_count_headers_of(void *cls, enum MHD_ValueKind kind, const char *key,
                                                      const char *value) {
    (void)kind;
    struct chttpd_header_counts *counts = cls;
    if (key == NULL) return MHD_YES;
    if (strcasecmp(key, counts->first) == 0) counts->lines[0]++;
    else if (strcasecmp(key, counts->second) == 0) counts->lines[1]++;
    if (chttpd_header_line_is_misread(key, value, counts->end, &counts->next)) counts->misread++;
    return MHD_YES;
}

/* Counts the lines of `first` and `second`, and the misread ones, of the request whose request line `method`
   points to. */
static inline void chttpd_count_headers(struct MHD_Connection *connection, const char *method, const char *first,
                                        const char *second, unsigned int *first_lines, unsigned int *second_lines,
                                        unsigned int *misread_lines) {
    struct chttpd_header_counts counts = {first, second, chttpd_header_end(connection, method), {0, 0}, 0, NULL};
    MHD_get_connection_values(connection, MHD_HEADER_KIND, chttpd_count_headers_of, &counts);
    if (chttpd_last_header_line_is_misread(counts.next, counts.end)) counts.misread++;
    *first_lines = counts.lines[0];
    *second_lines = counts.lines[1];
    *misread_lines = counts.misread;
}

/* The allocator's free bytes not yet given back to the system (glibc's mallinfo2, whose struct and malloc.h Swift's
   Glibc module leaves out), and giving back the pages of free memory (malloc_trim): MemoryTrimmer. Not
   libmicrohttpd's, but the server's one shim. */
static inline size_t chttpd_heap_free_bytes(void) {
    return mallinfo2().fordblks;
}

static inline int chttpd_heap_trim(void) {
    return malloc_trim(0);
}

#endif
