import CHTTPD

/// One `text/event-stream` response on one connection: a queue of encoded events that libmicrohttpd pulls from
/// through a content-reader callback. Everything here runs on the connection's loop thread.
///
/// Nothing busy-loops and nothing blocks the loop: when the queue is empty the reader suspends the connection
/// (`MHD_suspend_connection` is allowed in a content reader) and returns 0; `send` resumes it. A reader that does
/// not keep up leaves bytes in the queue; past `maximumPendingBytes` the stream is **cut**: its queue is dropped
/// and the connection is closed at the next chance, so the server never buffers without bound. The client
/// resumes from its `Last-Event-ID`. Events are `[UInt8]` values shared (not copied) by every stream they are
/// queued on.
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
    /// Called the first time the stream waits for events (`HTTPServer.watchStream`).
    private let firstWait: (EventStream, OpaquePointer) -> Void
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

    /// `resume` resumes the suspended connection and makes the loop run libmicrohttpd again
    /// (`HTTPServer.resumeStream`); `firstWait` starts watching the connection for the client leaving
    /// (`HTTPServer.watchStream`), which `cut`s the stream; `wasCut` makes libmicrohttpd let go of the connection on
    /// the pass that closes it (`HTTPServer.cutStream`).
    init(
        connection: OpaquePointer, resume: @escaping (OpaquePointer) -> Void,
        firstWait: @escaping (EventStream, OpaquePointer) -> Void, wasCut: @escaping (OpaquePointer) -> Void
    ) {
        self.connection = connection
        self.resume = resume
        self.firstWait = firstWait
        self.wasCut = wasCut
    }

    /// Queues an event. False when the stream no longer takes events: it is ending, cut or closed, or this event
    /// would put it past `maximumPendingBytes` (it is cut then). An event is always taken when nothing is pending,
    /// however large: a reader that keeps up is never cut, and one that resumes gets its coalesced catch-up.
    ///
    /// - Complexity: O(1) amortized: the bytes are shared, not copied.
    @discardableResult
    func send(_ event: [UInt8]) -> Bool {
        guard state == .open else { return false }
        guard pendingBytes == 0 || pendingBytes + event.count <= Self.maximumPendingBytes else {
            cut()
            return false
        }
        queue.append(event)
        pendingBytes += event.count
        wake()
        return true
    }

    /// Sends what is queued, then ends the response cleanly.
    func end() {
        guard state == .open else { return }
        state = .ending
        wake()
    }

    /// Drops what is queued and closes the connection as soon as libmicrohttpd writes to it again (loop thread,
    /// outside `MHD_run`).
    func cut() {
        guard state == .open || state == .ending else { return }
        state = .cut
        queue = []
        head = 0
        offset = 0
        pendingBytes = 0
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
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.count <= 64)
            head = 0
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
            firstWait(self, connection)
        }
        return 0
    }

    private func didClose() {
        state = .closed
        queue = []
        pendingBytes = 0
        onClose?(self)
        onClose = nil
    }

    /// `MHD_CONTENT_READER_END_OF_STREAM` and `MHD_CONTENT_READER_END_WITH_ERROR` (macros Swift does not import).
    private static let endOfStream = -1
    private static let endWithError = -2

    // MARK: The response

    /// Queues the stream's response on its connection with `headers`; libmicrohttpd keeps it (and, through the
    /// retained context, this stream) until the connection is done with it. When it cannot, the stream is closed
    /// at once (`onClose` is called either way).
    func queueResponse(status: HTTPStatus, headers: [(name: String, value: String)]) -> Bool {
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
        let queued = MHD_queue_response(connection, UInt32(status.rawValue), response) == .YES
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
