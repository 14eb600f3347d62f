import CHTTPD
import Glibc

/// An event's bytes, and the same bytes framed as one chunk of a chunked HTTP/1.1 body (`<size in hex>\r\n`,
/// the bytes, `\r\n`): made once and shared (not copied) by every stream the event is sent on.
struct StreamEvent {
    let bytes: [UInt8]
    let chunk: [UInt8]

    init(_ bytes: [UInt8]) {
        // An empty chunk (`0\r\n\r\n`) would end the body.
        precondition(!bytes.isEmpty, "an event has bytes")
        self.bytes = bytes
        var chunk = Array(String(bytes.count, radix: 16).utf8)
        chunk.reserveCapacity(chunk.count + bytes.count + 4)
        chunk += [13, 10]
        chunk += bytes
        chunk += [13, 10]
        self.chunk = chunk
    }
}

/// One `text/event-stream` response on one connection: a queue of encoded events that libmicrohttpd pulls from
/// through a content-reader callback. Everything here runs on the connection's loop thread.
///
/// Nothing busy-loops and nothing blocks the loop: when the queue is empty the reader suspends the connection
/// (`MHD_suspend_connection` is allowed in a content reader) and returns 0; `send` resumes it. A reader that does
/// not keep up leaves bytes in the queue; past `maximumPendingBytes` the stream is **cut**: its queue is dropped
/// and the connection is closed at the next chance, so the server never buffers without bound. The client
/// resumes from its `Last-Event-ID`. Events are `[UInt8]` values shared (not copied) by every stream they are
/// queued on.
///
/// A stream that waits, on a chunked HTTP/1.1 response, is written to directly: libmicrohttpd has sent all it had
/// (its reader is called only once its buffer is out) and stays suspended, so an event goes out as one chunk in
/// one `send` on the socket, without resuming the connection (a resume, libmicrohttpd's pass over it, its reader,
/// `epoll_ctl` twice and the suspension cost more than the `send`). What the socket does not take waits in
/// `unsent` for `writable`; libmicrohttpd is resumed only to end or cut the stream, once `unsent` is out.
final class EventStream {
    /// Bytes queued and not yet taken by libmicrohttpd past which a stream is cut.
    static let maximumPendingBytes = 1 << 20

    enum State {
        /// Events are sent as they come.
        case open
        /// What is queued is sent, then the stream ends cleanly (the last chunk of the chunked body).
        case ending
        /// The reader fell too far behind: the connection is closed without sending the rest.
        case cut
        /// libmicrohttpd is done with the response (the connection closed or the stream ended).
        case closed
    }

    private let connection: OpaquePointer
    private let resume: (OpaquePointer) -> Void
    /// Called the first time the stream waits for events (`HTTPServer.watchStream`): true when the socket is
    /// watched for room (and the client leaving), which writing to it directly needs.
    private let firstWait: (EventStream, OpaquePointer) -> Bool
    /// Whether libmicrohttpd sends the body chunked (an HTTP/1.1 request): only then can chunks be written past it.
    private let isChunked: Bool
    /// The connection's socket, once events may be written to it directly (the stream waited once, chunked and
    /// watched); -1 before, and once the stream is done.
    private var socket: Int32 = -1
    /// Chunks written directly that the socket did not take yet, from `unsent[unsentHead]` at `unsentOffset`:
    /// each is the event's own, shared with every stream it is sent on, and a socket with room takes many in one
    /// `sendmsg`. Copying what a socket did not take cost each stalled stream a copy: of a large event, made on
    /// the loop (300 streams that read nothing held 1.5 GB of one 5 MB changeset, and the copies held the loop for
    /// 1.6 s), and of small ones joined for one `send` each (1,000 streams that read nothing held 1.1 GB of 2 KB
    /// events, 1 MiB each before they were cut). A stalled stream now holds a reference per event (8 bytes, not
    /// counted in `pendingBytes`): about 56 KB at the 1 MiB cut with events of 150 bytes, the smallest there are.
    private var unsent: [[UInt8]] = []
    private var unsentHead = 0
    private var unsentOffset = 0
    /// Bytes of `unsent` the socket has not taken.
    private var unsentBytes = 0
    /// The most chunks one `sendmsg` hands the socket.
    private static let chunksPerSend = 64
    /// When the socket last took bytes of `unsent`, or when `unsent` began (monotonic milliseconds).
    private var lastProgress: Int64 = 0
    /// Set when a direct `send` failed for a reason other than a full socket: the client is gone.
    private(set) var clientIsGone = false
    /// Called once when the stream is cut, before its connection is resumed (`HTTPServer.cutStream`).
    private let wasCut: (OpaquePointer) -> Void
    private var hasWaited = false
    private var queue: [[UInt8]] = []
    /// The index in `queue` of the first event not fully taken, and how much of it was taken.
    private var head = 0
    private var offset = 0
    private(set) var pendingBytes = 0
    private(set) var state = State.open
    /// Suspended by the reader for want of bytes.
    private var isWaiting = false
    /// Called once, when libmicrohttpd frees the response.
    var onClose: ((EventStream) -> Void)?
    /// What shares the bytes the stream started with (`start`), held until they are out.
    private var startedWith: AnyObject?
    /// The bytes the stream started with that libmicrohttpd has not taken yet: they are not held against
    /// `maximumPendingBytes` (a snapshot of several MB would have the first event after it cut the stream, and its
    /// client, which never got the snapshot's id, would start over with another).
    private var startBytesPending = 0

    /// `resume` resumes the suspended connection and makes the loop run libmicrohttpd again
    /// (`HTTPServer.resumeStream`); `firstWait` starts watching the connection for the client leaving
    /// (`HTTPServer.watchStream`), which `cut`s the stream; `wasCut` makes libmicrohttpd let go of the connection on
    /// the pass that closes it (`HTTPServer.cutStream`).
    init(
        connection: OpaquePointer, isChunked: Bool, resume: @escaping (OpaquePointer) -> Void,
        firstWait: @escaping (EventStream, OpaquePointer) -> Bool, wasCut: @escaping (OpaquePointer) -> Void
    ) {
        self.connection = connection
        self.isChunked = isChunked
        self.resume = resume
        self.firstWait = firstWait
        self.wasCut = wasCut
    }

    /// Queues an event. False when the stream no longer takes events: it is ending, cut or closed, or this event
    /// would put it past `maximumPendingBytes` (it is cut then). An event is always taken when nothing is pending
    /// but what the stream started with, however large: a reader that keeps up is never cut, and one that resumes
    /// gets its coalesced catch-up.
    ///
    /// - Complexity: O(1) amortized: the bytes are shared, not copied.
    @discardableResult
    func send(_ event: StreamEvent) -> Bool {
        guard state == .open else { return false }
        // What the stream started with does not count: a reader that takes a large snapshot is not behind.
        let behind = pendingBytes - startBytesPending
        guard behind == 0 || behind + event.bytes.count <= Self.maximumPendingBytes else {
            cut()
            return false
        }
        if isWaiting, socket >= 0 {
            write(event.chunk)
            return state == .open
        }
        queue.append(event.bytes)
        pendingBytes += event.bytes.count
        wake()
        return true
    }

    /// Queues the events the stream starts with, however large (a snapshot), and keeps `owner`, what shares their
    /// bytes with other streams, until they are out: streams opened meanwhile find it and share them too.
    func start(_ events: [[UInt8]], holding owner: AnyObject?) {
        guard state == .open else { return }
        for bytes in events where !bytes.isEmpty {
            queue.append(bytes)
            pendingBytes += bytes.count
            startBytesPending += bytes.count
        }
        startedWith = owner
        wake()
    }

    /// Whether the stream ended (or is open) with bytes written past libmicrohttpd that its client has not taken.
    var hasUnsentBytes: Bool { unsentBytes > 0 }

    /// Since when the client has taken none of the stream's unsent bytes; nil when there are none. libmicrohttpd
    /// never times a suspended connection out, so a client that stops reading is cut by this (`StreamHub.tick`).
    var stalledSince: Int64? { hasUnsentBytes ? lastProgress : nil }

    /// Sends what is queued, then ends the response cleanly.
    func end() {
        guard state == .open else { return }
        state = .ending
        if unsentBytes == 0 { wake() }
    }

    /// Writes a chunk past libmicrohttpd (loop thread, outside `MHD_run`), after what the socket has not taken yet.
    private func write(_ chunk: [UInt8]) {
        if unsentBytes == 0 {
            let sent = chunk.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent == chunk.count { return }
            guard sent >= 0 || errno == EAGAIN || errno == EWOULDBLOCK else { return clientLeft() }
            unsent = [chunk]
            unsentHead = 0
            unsentOffset = max(0, sent)
            unsentBytes = chunk.count - unsentOffset
            lastProgress = MonotonicClock.now()
        } else {
            unsent.append(chunk)
            unsentBytes += chunk.count
        }
        pendingBytes = unsentBytes
    }

    /// The socket has room again: more of what was written past libmicrohttpd goes out; once all of it has, an
    /// ending stream lets libmicrohttpd end it (loop thread, outside `MHD_run`).
    func writable() {
        guard socket >= 0, unsentBytes > 0 else { return }
        var tookSome = false
        while unsentHead < unsent.count {
            let end = min(unsent.count, unsentHead + Self.chunksPerSend)
            var vectors: [iovec] = []
            vectors.reserveCapacity(end - unsentHead)
            let sent = sendUnsent(from: unsentHead, to: end, &vectors)
            guard sent >= 0 else {
                guard errno == EAGAIN || errno == EWOULDBLOCK else { return clientLeft() }
                break
            }
            tookSome = tookSome || sent > 0
            unsentBytes -= sent
            var left = sent
            // Let go of each chunk once it is out: a client that reads, but never all of it, holds only what it
            // lacks.
            while left > 0, unsentHead < end, left >= unsent[unsentHead].count - unsentOffset {
                left -= unsent[unsentHead].count - unsentOffset
                unsent[unsentHead] = []
                unsentHead += 1
                unsentOffset = 0
            }
            unsentOffset += left
            guard unsentHead == end else { break }
        }
        if tookSome { lastProgress = MonotonicClock.now() }
        pendingBytes = unsentBytes
        guard unsentBytes == 0 else {
            if unsentHead >= 64, unsentHead * 2 >= unsent.count {
                unsent.removeFirst(unsentHead)
                unsentHead = 0
            }
            return
        }
        unsent = []
        unsentHead = 0
        unsentOffset = 0
        if state == .ending { wake() }
    }

    /// One `sendmsg` of `unsent[index..<end]` (the first from `unsentOffset`), each chunk's bytes borrowed for
    /// the call: `vectors` gathers them, one nested borrow per chunk (at most `chunksPerSend`).
    private func sendUnsent(from index: Int, to end: Int, _ vectors: inout [iovec]) -> Int {
        guard index < end else {
            return vectors.withUnsafeMutableBufferPointer { vectors in
                var message = msghdr()
                message.msg_iov = vectors.baseAddress
                message.msg_iovlen = vectors.count
                return sendmsg(socket, &message, Int32(MSG_NOSIGNAL))
            }
        }
        return unsent[index].withUnsafeBytes { chunk in
            let skip = index == unsentHead ? unsentOffset : 0
            vectors.append(
                iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: chunk.baseAddress.map { $0 + skip }),
                    iov_len: chunk.count - skip))
            return sendUnsent(from: index + 1, to: end, &vectors)
        }
    }

    /// A direct `send` failed (the peer reset or closed the connection): the stream is cut, as the client left.
    private func clientLeft() {
        clientIsGone = true
        cut()
    }

    /// Drops what is queued and closes the connection as soon as libmicrohttpd writes to it again (loop thread,
    /// outside `MHD_run`).
    func cut() {
        guard state == .open || state == .ending else { return }
        state = .cut
        queue = []
        startedWith = nil
        startBytesPending = 0
        head = 0
        offset = 0
        pendingBytes = 0
        unsent = []
        unsentHead = 0
        unsentOffset = 0
        unsentBytes = 0
        socket = -1
        wasCut(connection)
        wake()
    }

    private func wake() {
        guard isWaiting else { return }
        isWaiting = false
        resume(connection)
    }

    /// The content reader: copies queued bytes into `buffer`; suspends the connection when there are none.
    private func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        switch state {
        case .cut, .closed: return Self.endWithError
        case .open, .ending: break
        }
        var written = 0
        while written < max, head < queue.count {
            let taken = queue[head].withUnsafeBytes { event in
                let count = min(event.count - offset, max - written)
                if let base = event.baseAddress {
                    (buffer + written).withMemoryRebound(to: UInt8.self, capacity: count) {
                        $0.update(from: base.assumingMemoryBound(to: UInt8.self) + offset, count: count)
                    }
                }
                return count
            }
            written += taken
            offset += taken
            if offset == queue[head].count {
                head += 1
                offset = 0
            }
        }
        pendingBytes -= written
        // The start's events are the first queued: they are taken first.
        startBytesPending = Swift.max(0, startBytesPending - written)
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.count <= 64)
            head = 0
            startedWith = nil
        } else if head >= 64 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        if written > 0 { return written }
        if state == .ending { return Self.endOfStream }
        isWaiting = true
        MHD_suspend_connection(connection)
        if !hasWaited {
            hasWaited = true
            if firstWait(self, connection), isChunked { socket = chttpd_connection_fd(connection) }
        }
        return 0
    }

    private func didClose() {
        state = .closed
        queue = []
        startedWith = nil
        startBytesPending = 0
        pendingBytes = 0
        unsent = []
        unsentHead = 0
        unsentOffset = 0
        unsentBytes = 0
        socket = -1
        onClose?(self)
        onClose = nil
    }

    /// `MHD_CONTENT_READER_END_OF_STREAM` and `MHD_CONTENT_READER_END_WITH_ERROR` (macros Swift does not import).
    private static let endOfStream = -1
    private static let endWithError = -2

    // MARK: The response

    /// Closes a stream whose response will never be queued (its headers do not fit the connection's memory).
    func close() {
        didClose()
    }

    /// Queues the stream's response on its connection with `headers`; libmicrohttpd keeps it (and, through the
    /// retained context, this stream) until the connection is done with it. When it cannot, the stream is closed
    /// at once (`onClose` is called either way). `headOnly`: the answer to a `HEAD`, which libmicrohttpd ends
    /// after its headers; it is sent unchunked, and the connection closed after it (`chttpd_response_unchunked`).
    func queueResponse(status: HTTPStatus, headers: [(name: String, value: String)], headOnly: Bool) -> Bool {
        let context = Unmanaged.passRetained(self).toOpaque()
        guard
            let response = MHD_create_response_from_callback(
                UInt64.max, 16 * 1024, Self.reader, context, Self.free)
        else {
            Unmanaged<EventStream>.fromOpaque(context).release()
            didClose()
            return false
        }
        for header in headers { MHD_add_response_header(response, header.name, header.value) }
        let framed = !headOnly || chttpd_response_unchunked(response) != 0
        let queued = framed && MHD_queue_response(connection, UInt32(status.rawValue), response) == .YES
        MHD_destroy_response(response)
        return queued
    }

    private static let reader: MHD_ContentReaderCallback = { context, _, buffer, max in
        guard let context, let buffer else { return endWithError }
        return Unmanaged<EventStream>.fromOpaque(context).takeUnretainedValue().read(into: buffer, max: max)
    }

    private static let free: MHD_ContentReaderFreeCallback = { context in
        guard let context else { return }
        let stream = Unmanaged<EventStream>.fromOpaque(context).takeRetainedValue()
        stream.didClose()
    }
}
