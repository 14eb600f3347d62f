import CHTTPD
import Glibc

/// Held exchanges and event streams watched for the client hanging up, on the loop's epoll.
extension HTTPServer {
    /// Watches a held exchange's socket for the client hanging up (`EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`); not
    /// for more input, which a pipelining client may send and MHD reads once the exchange is resumed. (An upload
    /// in progress is watched the same way: `watchUploads`.)
    ///
    /// The registration is one-shot and stays in the loop's epoll set after the answer: answering 10,000 held
    /// polls then costs no `epoll_ctl` at all (removing each had been a tenth of a fan-out's time). A socket
    /// registered already (an earlier poll on the same connection) is re-armed with one `EPOLL_CTL_MOD`; the kernel
    /// drops the registration when MHD closes the socket, and a hang-up reported after the answer finds no
    /// exchange in `watched` and is ignored, once (one-shot).
    func watchHangUp(of exchange: Exchange) {
        let descriptor = chttpd_connection_fd(exchange.connection)
        guard descriptor >= 0, register(hangUpOf: descriptor, events: EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue)
        else { return }
        exchange.watchedDescriptor = descriptor
        watched[descriptor] = exchange
    }

    /// Watches a stream's socket, once, when the stream first waits for events: for the client hanging up, so that
    /// one that leaves is let go at once, not at the next heartbeat or event; and for room after a `send` that the
    /// socket did not take whole (`EventStream.writable`). Edge-triggered, so that the registration lasts while the
    /// stream does without re-arming it for every event (room is then reported only after the socket was full).
    /// False when the socket cannot be watched.
    func watchStream(_ stream: EventStream, on connection: OpaquePointer) -> Bool {
        let descriptor = chttpd_connection_fd(connection)
        let events = EPOLLRDHUP.rawValue | EPOLLOUT.rawValue | EPOLLET.rawValue
        guard descriptor >= 0, register(hangUpOf: descriptor, events: events) else { return false }
        watchedStreams[descriptor] = stream
        return true
    }

    /// Registers a socket on the loop's epoll for `events`; false when it cannot be.
    private func register(hangUpOf descriptor: Int32, events: UInt32) -> Bool {
        var event = epoll_event()
        event.events = events
        event.data.fd = descriptor
        let registered = registeredDescriptors.contains(descriptor)
        guard
            epoll_ctl(loopEpoll, registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, descriptor, &event) == 0
                // A socket closed and its number reused since (MOD: gone), or registered by an earlier poll of
                // the same connection that this loop no longer remembers (ADD: already there).
                || epoll_ctl(loopEpoll, registered ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, descriptor, &event) == 0
        else { return false }
        registeredDescriptors.insert(descriptor)
        return true
    }

    /// Forgets the watch of a held poll or an upload; its one-shot registration stays (see `watchHangUp(of:)`).
    func unwatch(_ exchange: Exchange) {
        guard let descriptor = exchange.watchedDescriptor else { return }
        exchange.watchedDescriptor = nil
        // The socket's number may name another held exchange by now (this one was forgotten late).
        if watched[descriptor] === exchange { watched[descriptor] = nil }
    }

    /// Forgets an exchange that is no longer held.
    func forget(_ exchange: Exchange) {
        suspended[ObjectIdentifier(exchange)] = nil
        unwatch(exchange)
    }

    /// A watched socket reported hang-up: a held poll is let go and its connection closed unanswered, so that MHD
    /// frees the connection and its descriptor at once; a held mutation is left to its commit, which answers soon.
    func hungUp(_ descriptor: Int32) {
        // A stream's entry may be stale (the stream ended and the number was reused): a closed stream ignores it.
        if watched[descriptor] == nil, let stream = watchedStreams.removeValue(forKey: descriptor) {
            stream.cut()
            return
        }
        guard let exchange = watched[descriptor], let handler else { return }
        unwatch(exchange)
        if exchange.awaitsBody { return uploadHungUp(exchange) }
        guard exchange.isSuspended, handler.clientLeft(exchange) else { return }
        // Closed without an answer, as nginx closes a long request whose client gave up: a client that only
        // half-closed its side (shut down writing) looks the same here, and an answer it may still read would be
        // one no status fits (the poll did not run its course).
        closeUnanswered(exchange, logging: .clientClosedRequest)
    }

    /// Lets a held exchange go: MHD takes it back and closes its connection, sending nothing; the log says
    /// `status` (loop thread only).
    func closeUnanswered(_ exchange: Exchange, logging status: HTTPStatus) {
        exchange.isSuspended = false
        exchange.answersDirectly = false
        exchange.closesUnanswered = status
        forget(exchange)
        MHD_resume_connection(exchange.connection)
        runAgain = true
    }

    /// Resumes a connection an event stream suspended in its content reader (loop thread only).
    func resumeStream(_ connection: OpaquePointer) {
        MHD_resume_connection(connection)
        runAgain = true
    }

    /// A stream was cut: its content reader ends the response with an error the next time MHD calls it, and MHD
    /// closes the connection then. It must also let go of it at once.
    ///
    /// libmicrohttpd 0.9.75 (epoll mode) closes such a connection inside its idle handler (shutting the socket
    /// down) and frees it, closing the socket, only the next time it visits it. A pass visits the connections
    /// with events, every connection with a timeout of its own, and those with the daemon's timeout from the
    /// least recently active one up to the first that is still open. The stream's connection has no event left
    /// (it left MHD's epoll set when it was suspended) and its resume made it the most recently active: behind any
    /// older open connection on the loop (an idle keep-alive connection, such as a cache's connections to the
    /// origin) it waited until that one timed out. After a benchmark run through nginx, about half of 10,000 cut
    /// streams (those on the loop holding nginx's idle connections) kept their sockets for 120 s.
    ///
    /// So a cut stream's connection gets a timeout of its own (`closingTimeout`): MHD visits it on every pass,
    /// closes it on the pass that resumes it (the visit of the timeouts comes first) and frees it in the same
    /// pass (the visit of the resumed connections comes after). The timeout also bounds how long MHD goes on
    /// writing what it had taken before the cut to a client that reads nothing.
    ///
    /// Outside `MHD_run` only: MHD moves the connection between the lists its passes walk.
    func cutStream(_ connection: OpaquePointer) {
        assert(!insideLibrary, "a stream is cut outside libmicrohttpd's callbacks")
        _ = chttpd_set_connection_timeout(connection, closingTimeout)
    }

    /// Seconds a connection being let go (a cut stream, an upload whose client hung up or timed out) may go
    /// without activity: any value but the daemon's (`idleTimeout`), which would leave the connection in the list
    /// MHD walks only up to the first open connection.
    var closingTimeout: UInt32 { options.idleTimeout == 1 ? 2 : 1 }
}
