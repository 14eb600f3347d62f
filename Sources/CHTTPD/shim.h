#ifndef CHTTPD_SHIM_H
#define CHTTPD_SHIM_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <microhttpd.h>

/* MHD_start_daemon and MHD_get_daemon_info are variadic, which Swift cannot call: these wrappers fix
   the option list the server uses. */

typedef size_t (*chttpd_unescape_callback)(void *cls, struct MHD_Connection *connection, char *s);

/* Starts a daemon on an already listening socket, driven by the caller's own loop (no internal thread). */
static inline struct MHD_Daemon *chttpd_start_daemon(unsigned int flags, int listen_fd,
                                                     MHD_AccessHandlerCallback handler, void *handler_cls,
                                                     MHD_RequestCompletedCallback completed, void *completed_cls,
                                                     unsigned int connection_limit, unsigned int connection_timeout,
                                                     size_t connection_memory_limit,
                                                     unsigned int per_address_limit,
                                                     chttpd_unescape_callback unescape) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
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

#endif
