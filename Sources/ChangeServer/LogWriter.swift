import Dispatch
import Glibc
import Synchronization

/// Writes the log to stderr on a thread of its own, so that no event loop, journal thread or snapshot ever blocks
/// on a stderr that nobody reads. Each loop hands over the request lines of one turn at once; while more than
/// `capacity` bytes wait, what comes is dropped and counted (`changeserver_log_lines_dropped_total`), as a log
/// shipper's bounded buffer does. A batch larger than `capacity` still goes when nothing waits, so that a fan-out
/// to many polls is logged. Once closed (the process is ending), lines are written at once.
final class LogWriter: Sendable {
    private struct State {
        var batches: [[UInt8]] = []
        var bytes = 0
        var dropped = 0
        var closed = false
        var thread: JoinableThread?
    }

    /// Bytes that may wait for the writer before lines are dropped.
    let capacity: Int
    private let descriptor: Int32
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    /// The process's stderr.
    static let standardError = LogWriter()

    init(capacity: Int = 256 << 10, descriptor: Int32 = 2) {
        self.capacity = capacity
        self.descriptor = descriptor
    }

    /// Queues one turn's lines (`lines` of them); never blocks. The writer thread starts with the first batch.
    func submit(_ batch: [UInt8], lines: Int) {
        enum Outcome { case queued, dropped, direct }
        let outcome = state.withLock { state -> Outcome in
            if state.closed { return .direct }
            guard state.bytes == 0 || state.bytes + batch.count <= capacity else {
                state.dropped += lines
                return .dropped
            }
            state.batches.append(batch)
            state.bytes += batch.count
            if state.thread == nil { state.thread = JoinableThread { [self] in run() } }
            return .queued
        }
        switch outcome {
        case .queued: wake.signal()
        case .direct: writeAll(batch)
        case .dropped: break
        }
    }

    /// Lines dropped so far because the writer was behind.
    var droppedLines: Int { state.withLock { $0.dropped } }

    /// Writes what is queued and stops the thread (as the process ends); later lines are written at once.
    func close() {
        let thread = state.withLock { state in
            state.closed = true
            return state.thread
        }
        wake.signal()
        thread?.join()
    }

    private func run() {
        while true {
            wake.wait()
            let (batches, closed) = state.withLock { state in
                defer {
                    state.batches.removeAll()
                    state.bytes = 0
                }
                return (state.batches, state.closed)
            }
            for batch in batches { writeAll(batch) }
            if closed { return }
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                write(descriptor, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            offset += count
        }
    }
}
