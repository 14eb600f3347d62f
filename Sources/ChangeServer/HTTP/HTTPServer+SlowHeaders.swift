import CHTTPD
import Glibc

/// Requests whose headers trickle in: a client that has begun a request must send all of its headers within
/// `--header-timeout` seconds (60 by default, as nginx's `client_header_timeout`), or its connection gets `408` and
/// is closed.
///
/// libmicrohttpd times a connection out only after `idleTimeout` (`--idle-timeout`) without a byte, so a client that
/// sends one byte of its headers every minute kept its connection, one of `--max-connections`, for as long as it liked:
/// enough such clients (slowloris) shut everyone else out. The server cannot see a request before MHD has its headers,
/// so each connection is looked at once a second instead: one whose client sent more than an empty line since its last
/// request began (`tcpi_bytes_received`) while MHD still waits for headers has begun a request, and is closed
/// `--header-timeout` after that was first seen (so up to a second later than the bound). A connection on which nothing
/// arrives is idle, and MHD closes it after `idleTimeout`.
///
/// What a request costs for this is one counter, in the connection's record (MHD's socket context); the look, one
/// `getsockopt` per idle connection per second, runs only over connections between requests.
extension HTTPServer {
    /// One connection as this loop knows it, from MHD's start notice to its close notice.
    final class ConnectionRecord {
        let connection: OpaquePointer
        /// Bytes the client had sent before MHD's view of the connection began: 0, or those that went to an earlier
        /// view of a connection handed back after a direct answer (`HTTPServer+DirectAnswers.swift`).
        let base: Int64
        /// Requests whose headers arrived on it (counted by `access`).
        var requests = 0
        /// Where the current request's target starts in libmicrohttpd's memory, and its length up to its first NUL,
        /// noted before libmicrohttpd splits it (`HTTPServer.targetArrived`).
        var target: (start: UnsafePointer<CChar>, length: Int)?
        /// The request count and bytes received when last looked at between requests; `nil` requests: not yet.
        var seenRequests: Int?
        var seenBytes: Int64 = 0
        /// When a request was first seen begun (monotonic milliseconds): more than an empty line came since
        /// `seenBytes`.
        var begunAt: Int64?
        /// Its place in `connectionRecords`.
        var index = 0

        init(connection: OpaquePointer, base: Int64) {
            self.connection = connection
            self.base = base
            seenBytes = base
            seenRequests = 0
        }
    }

    /// MHD started a connection: its record goes into the socket context, which holds it until the close notice.
    func connectionStarted(_ connection: OpaquePointer, _ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        let record = ConnectionRecord(connection: connection, base: handedBackBase ?? 0)
        record.index = connectionRecords.count
        connectionRecords.append(record)
        context.pointee = Unmanaged.passRetained(record).toOpaque()
        openConnections.store(connectionRecords.count, ordering: .relaxed)
        // A connection handed back after a direct answer is no new client (`HTTPServer+DirectAnswers.swift`).
        if handedBackBase == nil, connectionRecords.count >= options.connectionLimit {
            handler?.connectionLimitReached(limit: options.connectionLimit)
        }
    }

    /// MHD closed a connection: its record is let go.
    func connectionClosed(_ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let opaque = context.pointee else { return }
        context.pointee = nil
        let record = Unmanaged<ConnectionRecord>.fromOpaque(opaque).takeRetainedValue()
        let last = connectionRecords.removeLast()
        if last !== record {
            last.index = record.index
            connectionRecords[record.index] = last
        }
        openConnections.store(connectionRecords.count, ordering: .relaxed)
    }

    /// The record of a connection MHD knows, if it has one.
    func record(of connection: OpaquePointer) -> ConnectionRecord? {
        chttpd_socket_context(connection).map { Unmanaged<ConnectionRecord>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Closes, with `408`, the connections whose request began `--header-timeout` ago or more and whose headers MHD
    /// still waits for. Each loop turn looks at a share of the connections in proportion to the time since the last
    /// turn, so that each is looked at about once a second, and no turn looks at them all: at about 1.5 µs a look,
    /// 15,000 idle connections on a loop would hold it for over 20 ms at once.
    func expireSlowHeaders(now: Int64) {
        headerLooksOwed += connectionRecords.count * Int(min(max(0, now - lastHeaderLook), 1000))
        lastHeaderLook = now
        let looks = min(headerLooksOwed / 1000, connectionRecords.count)
        headerLooksOwed = looks == connectionRecords.count ? 0 : headerLooksOwed - looks * 1000
        guard looks > 0 else { return }
        let timeout = Int64(options.headerTimeout) * 1000
        var expired: [ConnectionRecord] = []
        for _ in 0..<looks {
            // Records leave by swapping with the last: one may be looked at twice in a round, or once skipped.
            if nextHeaderLook >= connectionRecords.count { nextHeaderLook = 0 }
            let record = connectionRecords[nextHeaderLook]
            nextHeaderLook += 1
            if hasOutlastedHeaderTimeout(record, now: now, timeout: timeout) { expired.append(record) }
        }
        for record in expired { closeSlowHeaders(record, now: now) }
    }

    /// Looks at one connection: whether the request begun on it has waited for its headers `timeout` or more.
    private func hasOutlastedHeaderTimeout(_ record: ConnectionRecord, now: Int64, timeout: Int64) -> Bool {
        // MHD gives a request's header size from when its headers are in until its answer is sent: that request is
        // timed otherwise (`--body-timeout`, the poll's hold), and the next is looked at anew.
        guard chttpd_request_header_size(record.connection) < 0 else {
            record.seenRequests = nil
            return false
        }
        let received = chttpd_bytes_received(chttpd_connection_fd(record.connection))
        guard received >= 0 else { return false }
        guard record.seenRequests == record.requests else {
            record.seenRequests = record.requests
            record.seenBytes = received
            record.begunAt = nil
            return false
        }
        // Up to two bytes are an empty line, which a client may send between requests (RFC 9112 §2.2) and
        // libmicrohttpd skips: not a request begun.
        guard received > record.seenBytes + 2 else { return false }
        let begun = record.begunAt ?? now
        record.begunAt = begun
        return now - begun >= timeout
    }

    /// `408` written on the socket (MHD has no request to answer: it has not read the headers), then both sides shut
    /// down: MHD reads the end of the stream and closes the connection.
    private func closeSlowHeaders(_ record: ConnectionRecord, now: Int64) {
        guard let handler else { return }
        let socket = chttpd_connection_fd(record.connection)
        guard socket >= 0 else { return }
        let response = handler.response(to: .headersTimedOut(seconds: options.headerTimeout))
        _ = sendClosing(response, on: record.connection, includingBody: true)
        shutdown(socket, Int32(SHUT_RDWR))
        runAgain = true
        handler.headersTimedOut(milliseconds: Int(now - (record.begunAt ?? now)))
        record.begunAt = nil
        record.seenRequests = nil
    }
}
