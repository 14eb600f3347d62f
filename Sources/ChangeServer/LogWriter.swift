import Dispatch
import Glibc
import Synchronization

/// Writes the log to stderr on a thread of its own, so that no event loop, journal thread or snapshot ever blocks
/// on a stderr that nobody reads. Each loop hands over the request lines of one turn at once; while more than
/// `capacity` bytes wait, what comes is dropped and counted (`changeserver_log_lines_dropped_total`), as a log
/// shipper's bounded buffer does. A batch of any size still goes while less than `flushBytes` waits (lines the
/// writer is only collecting), so that a fan-out to many polls is logged even right after other requests; what
/// waits is then at most `flushBytes` and one batch. Once closed (the process is ending), lines are written at
/// once.
///
/// Request lines are written in bulk, as nginx's `access_log … buffer= flush=` does: the first batch wakes the
/// writer, which then collects for `flushInterval`, or until `flushBytes` wait, and writes them all with one
/// system call. Waking the writer for every loop turn cost a tenth of a small read's time when the server had one
/// core: each wake was a switch to the writer thread and back. Other lines (start, warnings, errors) are urgent:
/// they end the collecting at once.
final class LogWriter: Sendable {
    private struct State {
        var batches: [[UInt8]] = []
        var bytes = 0
        var dropped = 0
        var closed = false
        /// The writer should write what waits now rather than collect further.
        var hurry = false
        var thread: JoinableThread?
    }

    /// Bytes that may wait for the writer before lines are dropped.
    let capacity: Int
    /// Bytes that end the writer's collecting early.
    let flushBytes: Int
    /// How long request lines may wait to be written with the ones that follow them.
    let flushInterval: DispatchTimeInterval
    private let descriptor: Int32
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    /// Signalled once the writer has written what `close` left it, and returned.
    private let done = DispatchSemaphore(value: 0)
    /// Entered by the `close` that took the thread, left when it is done: what a second `close` waits on.
    private let closing = DispatchGroup()
    /// Bytes written so far: what tells `close` a slow stderr from one that takes nothing.
    private let written = Atomic<Int>(0)

    /// The process's stderr.
    static let standardError = LogWriter()

    init(
        capacity: Int = 256 << 10, flushBytes: Int = 64 << 10, flushInterval: DispatchTimeInterval = .milliseconds(50),
        descriptor: Int32 = 2
    ) {
        self.capacity = capacity
        self.flushBytes = flushBytes
        self.flushInterval = flushInterval
        self.descriptor = descriptor
    }

    /// Queues lines (`lines` of them); never blocks. Urgent lines are written at once, others within
    /// `flushInterval`. The writer thread starts with the first batch.
    func submit(_ batch: [UInt8], lines: Int, urgent: Bool = false) {
        enum Outcome {
            case queued(wake: Bool)
            case dropped, direct
        }
        let outcome = state.withLock { state -> Outcome in
            if state.closed { return .direct }
            guard state.bytes < flushBytes || state.bytes + batch.count <= capacity else {
                state.dropped += lines
                return .dropped
            }
            // The writer waits for a first batch, then, while it collects, for a reason to stop collecting.
            var wakeWriter = state.bytes == 0
            state.batches.append(batch)
            state.bytes += batch.count
            if !state.hurry && (urgent || state.bytes >= flushBytes) {
                state.hurry = true
                wakeWriter = true
            }
            if state.thread == nil { state.thread = JoinableThread { [self] in run() } }
            return .queued(wake: wakeWriter)
        }
        switch outcome {
        case .queued(let wakeWriter): if wakeWriter { wake.signal() }
        case .direct: writeAll(batch)
        case .dropped: break
        }
    }

    /// Lines dropped so far because the writer was behind.
    var droppedLines: Int { state.withLock { $0.dropped } }

    /// How long `close` waits for stderr to take more of what waits, and how long in all (milliseconds).
    static let closingStall = 2000
    static let closingLimit = 5000

    /// Writes what is queued and stops the thread (as the process ends); later lines are written at once. Waits
    /// for the thread while stderr takes what waits, up to `limit` in all, and until it has taken nothing for
    /// `stall`. A stderr that nobody reads (a log shipper stalled, a pipe never drained) must not hold the process
    /// up for good, so its last lines are then lost; a slow one keeps them. A call while another waits (the main
    /// thread's, and a signal's that ends the process) waits for that one, up to `limit`, so that neither ends
    /// the process before the lines are out.
    func close(stalledAfter stall: Int = LogWriter.closingStall, atMost limit: Int = LogWriter.closingLimit) {
        let thread = state.withLock { state in
            state.closed = true
            if state.thread != nil { closing.enter() }
            defer { state.thread = nil }
            return state.thread
        }
        wake.signal()
        guard let thread else {
            _ = closing.wait(timeout: .now() + .milliseconds(limit))
            return
        }
        defer { closing.leave() }
        let started = MonotonicClock.now()
        var progressed = started
        var lastWritten = written.load(ordering: .relaxed)
        while done.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
            let now = MonotonicClock.now()
            let writtenNow = written.load(ordering: .relaxed)
            if writtenNow != lastWritten {
                lastWritten = writtenNow
                progressed = now
            }
            if now - progressed >= Int64(stall) || now - started >= Int64(limit) {
                // Detached, blocked in its write: the process ends around it.
                _ = thread.join(within: 0)
                return
            }
        }
        thread.join()
    }

    /// A wake the writer did not use (both signals of a batch came before it looked at `hurry`) stays with the
    /// semaphore and only ends a later pass's collecting early: every pass writes whatever waits, an empty pass
    /// writes nothing, and each spare wake costs at most one such pass.
    private func run() {
        while true {
            wake.wait()
            if !state.withLock({ $0.hurry || $0.closed }) { _ = wake.wait(timeout: .now() + flushInterval) }
            let (batches, bytes, closed) = state.withLock { state in
                defer {
                    state.batches.removeAll()
                    state.bytes = 0
                    state.hurry = false
                }
                return (state.batches, state.bytes, state.closed)
            }
            if batches.count == 1 {
                writeAll(batches[0])
            } else if !batches.isEmpty {
                var joined: [UInt8] = []
                joined.reserveCapacity(bytes)
                for batch in batches { joined += batch }
                writeAll(joined)
            }
            if closed {
                done.signal()
                return
            }
        }
    }

    /// The most one system call writes: a blocking write into a pipe returns only once all of it is in, and
    /// `close` tells a slow stderr from a stuck one by the bytes written meanwhile.
    static let writeChunk = 16 << 10

    /// Where the write from `offset` ends: after the last whole line within `writeChunk`, or at `writeChunk` for a
    /// longer line. A file that other processes append to as well (`O_APPEND`, each write placed whole) then gets
    /// no line of theirs inside one of ours.
    static func pieceEnd(of bytes: [UInt8], from offset: Int) -> Int {
        let limit = offset + writeChunk
        guard limit < bytes.count else { return bytes.count }
        guard let newline = bytes[offset..<limit].lastIndex(of: UInt8(ascii: "\n")) else { return limit }
        return newline + 1
    }

    private func writeAll(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let end = Self.pieceEnd(of: bytes, from: offset)
            let count = bytes.withUnsafeBytes { buffer in
                write(descriptor, buffer.baseAddress.map { $0 + offset }, end - offset)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            offset += count
            written.add(count, ordering: .relaxed)
        }
    }
}
