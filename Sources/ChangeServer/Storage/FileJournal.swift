import Glibc
import Synchronization

/// The append-only journal under `--data-dir`, with group commit: with `--fsync always`, one syncer thread
/// runs `fdatasync` for everything written so far while the loop goes on writing, so concurrent mutations (on
/// any collections) share one sync and throughput grows with concurrency.
final class FileJournal: Journal, @unchecked Sendable {
    // @unchecked: all mutable state is in `state`, a Mutex; segment descriptors are owned by `Segment` objects
    // that a thread keeps alive while it syncs them.

    /// One open segment file.
    final class Segment: @unchecked Sendable {
        // @unchecked: `size` is read and written only under the journal's lock.
        let number: UInt64
        let descriptor: Int32
        var size: Int

        init(number: UInt64, descriptor: Int32, size: Int) {
            self.number = number
            self.descriptor = descriptor
            self.size = size
        }

        deinit { close(descriptor) }
    }

    private struct State {
        var segment: Segment
        /// Tickets: a counter of records written, never reused.
        var written: UInt64 = 0
        var synced: UInt64 = 0
        /// The records dropped by the last failed sync (counted as synced, but not durable).
        var lost: ClosedRange<UInt64>?
        /// The segment's size at `synced`, where a failed sync cuts it back to.
        var syncedSize: Int
        var pending: [(ticket: UInt64, done: @Sendable (Bool) -> Void)] = []
        /// Frames written but not yet in the file (`--fsync always`: the syncer writes them).
        var buffer: [UInt8] = []
        /// Whether the syncer waits for a wake-up (so that a write must send one).
        var syncerIsIdle = true
        var bytesSinceSnapshot = 0
    }

    private let directory: DataDirectory
    private let policy: Config.FsyncPolicy
    private let metrics: Metrics
    private let logger: Logger
    private let state: Mutex<State>
    /// Serialises syncs: the syncer's and those of `rotate` and `flush` on the loop thread.
    private let syncing = Mutex(())
    /// A pipe that wakes the syncer thread: written after each record, read (drained) by the syncer.
    private let wake: (read: Int32, write: Int32)

    /// Opens segment `number` for appending at `size` (creating it with its header when `size` is 0);
    /// `bytesSinceSnapshot` is what recovery replayed.
    init(
        directory: DataDirectory, segment number: UInt64, size: Int, bytesSinceSnapshot: Int,
        policy: Config.FsyncPolicy, metrics: Metrics, logger: Logger
    ) throws(StartupError) {
        self.directory = directory
        self.policy = policy
        self.metrics = metrics
        self.logger = logger
        let segment = try Self.openSegment(directory, number, size: size)
        state = Mutex(State(segment: segment, syncedSize: segment.size, bytesSinceSnapshot: bytesSinceSnapshot))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw StartupError("cannot create the journal's wake-up pipe") }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)
        wake = (ends[0], ends[1])
        switch policy {
        case .always: startThread { [self] in syncLoop() }
        case .interval: startThread { [self] in intervalLoop() }
        case .never: break
        }
    }

    private static func openSegment(_ directory: DataDirectory, _ number: UInt64, size: Int) throws(StartupError)
        -> Segment
    {
        let path = directory.segmentPath(number)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw StartupError("cannot open the journal \(path): \(String(cString: strerror(errno)))")
        }
        let segment = Segment(number: number, descriptor: descriptor, size: size)
        if size == 0 {
            guard ftruncate(descriptor, 0) == 0, writeAll(descriptor, JournalFormat.header, at: 0) else {
                throw StartupError("cannot write the journal \(path): \(String(cString: strerror(errno)))")
            }
            segment.size = JournalFormat.headerSize
            fdatasync(descriptor)
            directory.syncDirectory()
        }
        return segment
    }

    // MARK: Journal

    func write(_ record: [UInt8]) throws(HTTPError) -> UInt64 {
        let frame = JournalFormat.frame(record)
        let (ticket, wakeSyncer) = try state.withLock { state throws(HTTPError) -> (UInt64, Bool) in
            if policy == .always {
                // Group commit: the syncer writes and syncs everything buffered in one go. A failed write
                // surfaces as a failed sync, before anything of it was applied.
                state.buffer += frame
            } else {
                let segment = state.segment
                guard Self.writeAll(segment.descriptor, frame, at: segment.size) else {
                    let reason = String(cString: strerror(errno))
                    _ = ftruncate(segment.descriptor, off_t(segment.size))
                    logger.error("journal write failed: \(reason); the mutation was not applied")
                    throw HTTPError.storageUnavailable
                }
                segment.size += frame.count
            }
            state.bytesSinceSnapshot += frame.count
            state.written += 1
            defer { state.syncerIsIdle = false }
            return (state.written, state.syncerIsIdle)
        }
        metrics.setJournalBytes(bytesSinceSnapshot)
        if policy == .always && wakeSyncer {
            var one: UInt8 = 1
            _ = Glibc.write(wake.write, &one, 1)
        }
        return ticket
    }

    func isDurable(_ ticket: UInt64) -> Bool {
        policy != .always || state.withLock { ticket <= $0.synced && $0.lost?.contains(ticket) != true }
    }

    func whenDurable(_ ticket: UInt64, _ done: @escaping @Sendable (Bool) -> Void) {
        guard policy == .always else { return done(true) }
        let result: Bool? = state.withLock { state in
            if state.lost?.contains(ticket) == true { return false }
            if ticket <= state.synced { return true }
            state.pending.append((ticket, done))
            return nil
        }
        if let result { done(result) }
    }

    func flush() {
        sync()
    }

    var bytesSinceSnapshot: Int { state.withLock { $0.bytesSinceSnapshot } }

    /// Syncs the current segment and starts a new one; returns the new segment's number and the last ticket
    /// written before it.
    func rotate() throws(StartupError) -> (next: UInt64, lastTicket: UInt64) {
        sync()
        let (next, lastTicket) = state.withLock { ($0.segment.number + 1, $0.written) }
        let segment = try Self.openSegment(directory, next, size: 0)
        state.withLock { state in
            state.segment = segment
            state.syncedSize = segment.size
            state.bytesSinceSnapshot = 0
        }
        metrics.setJournalBytes(0)
        return (next, lastTicket)
    }

    // MARK: Syncing

    /// Writes what is buffered and syncs everything written, then runs the callbacks it makes durable (or lost,
    /// when the write or the sync fails).
    private func sync() {
        syncing.withLock { _ in
            let (segment, target, buffer) = state.withLock { state in
                defer { state.buffer = [] }
                return (state.segment, state.written, state.buffer)
            }
            let offset = state.withLock { _ in segment.size }
            let started = MonotonicClock.nanoseconds()
            let succeeded = Self.writeAll(segment.descriptor, buffer, at: offset) && fdatasync(segment.descriptor) == 0
            let reason = succeeded ? "" : String(cString: strerror(errno))
            metrics.fsyncTook(seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
            let ready = state.withLock { state -> [(ticket: UInt64, done: @Sendable (Bool) -> Void)] in
                guard target > state.synced else { return [] }
                if succeeded {
                    segment.size = offset + buffer.count
                    state.synced = target
                    if state.segment === segment { state.syncedSize = segment.size }
                    let split = state.pending.partitioningIndex { $0.ticket > target }
                    defer { state.pending.removeFirst(split) }
                    return Array(state.pending[..<split])
                }
                // After a failed write or fsync the kernel may have dropped dirty pages: cut the segment back to
                // what is known durable and drop every record written since, none of which was applied.
                _ = ftruncate(segment.descriptor, off_t(state.syncedSize))
                segment.size = state.syncedSize
                state.lost = (state.synced + 1)...target
                state.synced = target
                let split = state.pending.partitioningIndex { $0.ticket > target }
                defer { state.pending.removeFirst(split) }
                return Array(state.pending[..<split])
            }
            if !succeeded {
                logger.error("journal write or fsync failed: \(reason); \(ready.count) mutations answered 503")
            }
            for entry in ready { entry.done(succeeded) }
        }
    }

    private func syncLoop() {
        while true {
            var drained = [UInt8](repeating: 0, count: 4096)
            _ = read(wake.read, &drained, drained.count)
            while state.withLock({ state in
                if state.written > state.synced { return true }
                state.syncerIsIdle = true
                return false
            }) {
                sync()
            }
        }
    }

    private func intervalLoop() {
        while true {
            usleep(100_000)
            if state.withLock({ $0.written > $0.synced }) { sync() }
        }
    }

    private static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], at offset: Int) -> Bool {
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes {
                pwrite(descriptor, $0.baseAddress! + done, $0.count - done, off_t(offset + done))
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            done += count
        }
        return true
    }
}
