import CHTTPD
import Glibc

/// Held polls answered outside libmicrohttpd.
///
/// Through MHD, answering a held poll costs a resume, MHD's state machine, its response headers built in the
/// connection's pool, a `sendmsg`, a `setsockopt`, a `recv` that finds nothing, an `epoll_ctl` that puts the socket
/// back in MHD's set and a pool reset that zeroes (and first touches) the connection's 8 KiB: with 10,000 polls,
/// more than twice the time of the `sendmsg`s themselves. So a held poll that allows it is answered with the
/// shared response's bytes (`SharedResponse.wire`, written once per response) in one `send` on its socket, and
/// nothing else on the way to the next answer. Once the fan-out is done (`handBack`), its connection goes back to
/// MHD: the socket is duplicated, MHD's side is closed on a placeholder (so that MHD never shuts the client's socket
/// down), and the socket is added to MHD again as a new connection (`MHD_add_connection`), where the client's next
/// request is read as usual.
///
/// A poll may be answered so (`mayAnswerDirectly`) when it is a plain keep-alive HTTP/1.1 `GET` without a body and
/// MHD has read nothing after it: everything the client sent on the connection (`tcpi_bytes_received`) is this
/// request (`MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE`) plus what went to MHD's earlier views of the connection. A
/// pipelined request already read into MHD's buffer would be lost with MHD's side of the connection; such polls,
/// and every other one, are answered through MHD.
extension HTTPServer {
    /// An answer sent outside MHD whose rest waits for room in the socket.
    struct PendingWrite {
        let exchange: Exchange
        let response: SharedResponse
        var offset: Int
        /// A client that does not read its answer within the idle timeout is let go.
        let deadline: Int64
    }

    /// Whether a held request may be answered outside MHD (see the type's comment).
    func mayAnswerDirectly(_ exchange: Exchange, version: UnsafePointer<CChar>?) -> Bool {
        let request = exchange.request
        guard request.method == "GET", let version, strcmp(version, "HTTP/1.1") == 0, request.body.isEmpty,
            request.header("Content-Length") == nil, request.header("Transfer-Encoding") == nil,
            request.listHeader("Connection")?.lowercased().contains("close") != true
        else { return false }
        let descriptor = chttpd_connection_fd(exchange.connection)
        let headerSize = chttpd_request_header_size(exchange.connection)
        guard descriptor >= 0, headerSize > 0 else { return false }
        exchange.socket = descriptor
        // The bytes the client had sent before MHD's current view of the connection began (0 for one MHD accepted).
        let base = record(of: exchange.connection)?.base ?? 0
        return chttpd_bytes_received(descriptor) == base + headerSize
    }

    /// Answers exchanges outside MHD, at once. The first such answer of a loop turn lets MHD send what it has
    /// first (twice: a `Connection: close` answer's connection closes on MHD's next pass): above all the answer to
    /// the mutation behind a fan-out, which the committer hands over before the fan-out, and whose client should
    /// not wait for the fan-out. Inside MHD's callbacks, where MHD cannot be run, the answers wait for the end of
    /// the loop turn's `MHD_run` (`sendDirectAnswers`).
    func answerDirectly(_ exchanges: [Exchange], _ response: SharedResponse) {
        runAgain = true
        for exchange in exchanges {
            releaseBody(of: exchange)
            exchange.leavesLibrary = true
        }
        guard !insideLibrary, let daemon else {
            for exchange in exchanges { toSend.append((exchange, response)) }
            return
        }
        if !libraryFlushed {
            libraryFlushed = true
            runLibrary(daemon)
            runLibrary(daemon)
        }
        // One `send` per socket, nothing else in the loop.
        response.wire.withUnsafeBytes { wire in
            for exchange in exchanges {
                let sent = send(exchange.socket, wire.baseAddress, wire.count, Int32(MSG_NOSIGNAL))
                if sent == wire.count {
                    answeredDirectly.append(exchange)
                } else {
                    sendFailed(exchange, response, sent: sent, error: sent < 0 ? errno : 0)
                }
            }
        }
        for exchange in exchanges { answeredNow.append((exchange, response)) }
    }

    /// Sends an answer on its exchange's socket: the whole of it, or what fits (the rest when there is room).
    private func deliver(_ response: SharedResponse, to exchange: Exchange) {
        let wire = response.wire
        let sent = wire.withUnsafeBytes { send(exchange.socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent == wire.count {
            answeredDirectly.append(exchange)
        } else {
            sendFailed(exchange, response, sent: sent, error: sent < 0 ? errno : 0)
        }
    }

    /// A `send` that did not take the whole answer: the rest waits for room, or the client is gone.
    private func sendFailed(_ exchange: Exchange, _ response: SharedResponse, sent: Int, error: Int32) {
        guard sent >= 0 || error == EAGAIN || error == EWOULDBLOCK else { return letGo(exchange) }
        writing[exchange.socket] = PendingWrite(
            exchange: exchange, response: response, offset: max(0, sent),
            deadline: MonotonicClock.now() + Int64(options.idleTimeout) * 1000)
        awaitRoom(exchange.socket)
    }

    /// Sends the answers given outside MHD inside its callbacks in this loop turn, then logs every answer given
    /// outside MHD in it (once they are all out).
    func sendDirectAnswers() {
        for (exchange, response) in toSend { deliver(response, to: exchange) }
        answeredNow += toSend
        toSend.removeAll(keepingCapacity: true)
        for (exchange, response) in answeredNow {
            forget(exchange)
            handler?.didRespond(exchange, status: response.status)
        }
        answeredNow.removeAll(keepingCapacity: true)
        libraryFlushed = false
    }

    /// The socket of a pending answer is writable (or the client hung up).
    func continueWriting(_ descriptor: Int32, events: UInt32) {
        guard var pending = writing[descriptor] else { return }
        if events & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            writing[descriptor] = nil
            return letGo(pending.exchange)
        }
        let wire = pending.response.wire
        let sent = wire.withUnsafeBytes {
            send(descriptor, $0.baseAddress! + pending.offset, $0.count - pending.offset, Int32(MSG_NOSIGNAL))
        }
        guard sent >= 0 || errno == EAGAIN || errno == EWOULDBLOCK else {
            writing[descriptor] = nil
            return letGo(pending.exchange)
        }
        pending.offset += max(0, sent)
        if pending.offset == wire.count {
            writing[descriptor] = nil
            answeredDirectly.append(pending.exchange)
            runAgain = true
        } else {
            writing[descriptor] = pending
            awaitRoom(descriptor)
        }
    }

    /// Answers whose client does not read them within the idle timeout are let go.
    func expireWrites(now: Int64) {
        for (descriptor, pending) in writing where pending.deadline <= now {
            writing[descriptor] = nil
            letGo(pending.exchange)
        }
    }

    /// The server stops and its grace period is over: answers still being written are let go.
    func abandonWrites() {
        for pending in writing.values { letGo(pending.exchange) }
        writing.removeAll()
    }

    /// Gives the connections answered outside MHD back to it: each socket is duplicated, MHD's side is pointed at
    /// the placeholder and let go (the handler answers its call after the resume with `MHD_NO`), and the socket is
    /// added to MHD as a new connection, marked with the bytes its client had sent so far. A stopping server
    /// closes them instead. MHD closes the socket itself when it cannot take it (its connection limit).
    ///
    /// A few at a time (`handBackBatch`): until MHD has closed its side, a connection takes two descriptors, and
    /// the server's connection limits leave only a few spare under the open-files limit.
    func handBack(_ daemon: OpaquePointer) {
        guard !answeredDirectly.isEmpty else { return }
        var start = 0
        while start < answeredDirectly.count {
            let end = min(start + Self.handBackBatch, answeredDirectly.count)
            handBack(answeredDirectly[start..<end], daemon)
            start = end
        }
        answeredDirectly.removeAll(keepingCapacity: true)
        runAgain = true
    }

    /// Connections handed back per MHD pass: below the descriptors the connection limits leave spare.
    static let handBackBatch = 32

    private func handBack(_ exchanges: ArraySlice<Exchange>, _ daemon: OpaquePointer) {
        var sockets: [(descriptor: Int32, address: sockaddr_storage, length: socklen_t, base: Int64)] = []
        for exchange in exchanges {
            let descriptor = chttpd_connection_fd(exchange.connection)
            // The number is about to name the placeholder, then anything: its hang-up registration goes first.
            if registeredDescriptors.remove(descriptor) != nil { epoll_ctl(loopEpoll, EPOLL_CTL_DEL, descriptor, nil) }
            var address = sockaddr_storage()
            let length = chttpd_client_address(exchange.connection, &address)
            let received = chttpd_bytes_received(descriptor)
            let unread = chttpd_unread_bytes(descriptor)
            if stopDeadline == nil, length > 0, received >= 0, unread >= 0 {
                let kept = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
                if kept >= 0 && dup2(placeholder, descriptor) >= 0 {
                    sockets.append((kept, address, length, received - unread))
                } else if kept >= 0 {
                    close(kept)
                }
            }
            MHD_resume_connection(exchange.connection)
        }
        // MHD lets go of the resumed sides (and frees their descriptors and connection slots) before it takes the
        // sockets again.
        runLibrary(daemon)
        for var socket in sockets {
            handedBackBase = socket.base
            _ = withUnsafePointer(to: &socket.address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    MHD_add_connection(daemon, socket.descriptor, $0, socket.length)
                }
            }
        }
        handedBackBase = nil
    }

    /// Lets go of an exchange answered outside MHD without handing its connection back (the client is gone, or
    /// never read its answer): MHD closes it.
    private func letGo(_ exchange: Exchange) {
        MHD_resume_connection(exchange.connection)
        runAgain = true
    }

    /// Waits (one-shot) for room in the socket of a pending answer, or for the client hanging up.
    private func awaitRoom(_ descriptor: Int32) {
        var event = epoll_event()
        event.events = EPOLLOUT.rawValue | EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue
        event.data.fd = descriptor
        if epoll_ctl(loopEpoll, EPOLL_CTL_MOD, descriptor, &event) == 0
            || epoll_ctl(loopEpoll, EPOLL_CTL_ADD, descriptor, &event) == 0
        {
            registeredDescriptors.insert(descriptor)
        } else if let pending = writing.removeValue(forKey: descriptor) {
            letGo(pending.exchange)
        }
    }
}
