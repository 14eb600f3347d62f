import Dispatch
import Glibc
import Synchronization

/// The append-only journal under `--data-dir`, with group commit: with `--fsync always`, one syncer thread
/// runs `fdatasync` for everything written so far while the loop goes on writing, so concurrent mutations (on
/// any collections) share one sync and throughput grows with concurrency. Each of its passes starts with a sync
/// mark, and it keeps zeros written ahead of the last record (`JournalFormat`, version 2); with the other policies
/// a mark goes before the first record written after a sync.
final class FileJournal: Journal, @unchecked Sendable {
    // @unchecked: all mutable state is in `state`, a Mutex; segment descriptors are owned by `Segment` objects
    // that a thread keeps alive while it syncs them.

    /// One open segment file.
    final class Segment: @unchecked Sendable {
        // @unchecked: `size` is read and written only under the journal's lock, `zeroedEnd` by the syncer thread
        // alone (and at creation).
        let number: UInt64
        let descriptor: Int32
        var size: Int
        /// Where the zeros written ahead of `size` end (`--fsync always`): see `JournalFormat.preallocation`.
        var zeroedEnd: Int

        init(number: UInt64, descriptor: Int32, size: Int) {
            self.number = number
            self.descriptor = descriptor
            self.size = size
            var info = stat()
            zeroedEnd = fstat(descriptor, &info) == 0 ? max(size, Int(info.st_size)) : size
        }

        deinit { Glibc.close(descriptor) }
    }

    private struct State {
        var segment: Segment
        /// Tickets: a counter of records written, never reused.
        var written: UInt64 = 0
        var synced: UInt64 = 0
        /// The segment's size at `synced`, where a failed sync cuts it back to.
        var syncedSize: Int
        /// With `--fsync interval` and `never`: an offset synced since the last mark, to be marked before the next
        /// record (`JournalFormat.mark(synced:)`).
        var unmarkedSync: Int?
        /// Set when a sync of the current segment failed with `--fsync interval`: the kernel may have dropped pages
        /// that a later sync, succeeding, would not write, so no mark may vouch for the segment any more.
        var isUnmarkable = false
        var pending: [(ticket: UInt64, done: @Sendable (Bool) -> Void)] = []
        /// Frames written but not yet in the file (`--fsync always`: the syncer writes them).
        var buffer: [[UInt8]] = []
        /// Whether the syncer waits for a wake-up (so that a write must send one).
        var syncerIsIdle = true
        /// A rotation asked for, run by the syncer after its current pass.
        var rotation: (@Sendable (UInt64?) -> Void)?
        var bytesSinceSnapshot = 0
        /// `flush` calls waiting for everything written to be synced and called back.
        var flushWaiters: [DispatchSemaphore] = []
        /// Set by `close`: the syncer and interval threads finish what is pending and return.
        var isClosing = false
    }

    private let directory: DataDirectory
    private let policy: Config.FsyncPolicy
    /// The largest record taken: what one frame can hold (`JournalFormat.maximumPayload`), or less in tests.
    private let recordLimit: Int
    private let metrics: Metrics
    private let logger: Logger
    /// Failed writes (and, with `--fsync always`, the syncer's syncs), and with `--fsync interval` failed syncs:
    /// logged at most once a second, and shown by `/healthz` and `/metrics`. Kept apart so that a write that
    /// succeeds does not hide a sync that keeps failing.
    private let failures: WriteFailures
    private let syncFailures: WriteFailures
    private let state: Mutex<State>
    /// Keeps write-and-callback atomic when the journal calls back at once (`--fsync interval` and `never`).
    private let ordering = Mutex(())
    /// A pipe that wakes the syncer thread: written after each record, read (drained) by the syncer.
    private let wake: (read: Int32, write: Int32)
    /// The syncer (`--fsync always`) or interval (`--fsync interval`) thread, joined by `close`.
    private let thread = Mutex<JoinableThread?>(nil)
    /// Wakes the interval thread early when the journal closes.
    private let closing = DispatchSemaphore(value: 0)

    /// Opens segment `number` for appending at `size` (creating it with its header when `size` is 0);
    /// `bytesSinceSnapshot` is what recovery replayed.
    init(
        directory: DataDirectory, segment number: UInt64, size: Int, bytesSinceSnapshot: Int,
        policy: Config.FsyncPolicy, recordLimit: Int = JournalFormat.maximumPayload, metrics: Metrics, logger: Logger
    ) throws(StartupError) {
        self.directory = directory
        self.policy = policy
        self.recordLimit = min(recordLimit, JournalFormat.maximumPayload)
        self.metrics = metrics
        self.logger = logger
        let log: @Sendable (LogLevel, String) -> Void = { logger.log($0, $1) }
        failures = WriteFailures(policy == .always ? "journal write or fsync" : "journal write", log: log)
        syncFailures = WriteFailures("journal fsync", log: log)
        // What recovery replayed counts toward the next snapshot, and the gauge says so from the start.
        metrics.setJournalBytes(bytesSinceSnapshot)
        let segment = try Self.openSegment(directory, number, size: size)
        JournalHead.record(number, in: directory, logger: logger)
        RunRecord.write(directory, policy: policy, closed: false, logger: logger)
        // `openSegment` synced what is there: the first record written will say so (the syncer's first pass does).
        state = Mutex(
            State(
                segment: segment, syncedSize: segment.size,
                unmarkedSync: policy != .always && size > JournalFormat.headerSize ? size : nil,
                bytesSinceSnapshot: bytesSinceSnapshot))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw StartupError("cannot create the journal's wake-up pipe") }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)
        wake = (ends[0], ends[1])
        switch policy {
        case .always: thread.withLock { $0 = JoinableThread { [self] in syncLoop() } }
        case .interval: thread.withLock { $0 = JoinableThread { [self] in intervalLoop() } }
        case .never: break
        }
    }

    /// Opens segment `number` at `size`, or, when `size` is 0, makes it: its header is written and synced under
    /// another name (`journal-….log.tmp`), then renamed into place, so that a segment is never seen without its
    /// whole header, and recovery can take one that ends inside it for what it is, a file cut short.
    private static func openSegment(_ directory: DataDirectory, _ number: UInt64, size: Int) throws(StartupError)
        -> Segment
    {
        let path = directory.segmentPath(number)
        guard size == 0 else {
            let descriptor = open(path, O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw StartupError("cannot open the journal \(path): \(String(cString: strerror(errno)))")
            }
            // What recovery read may have been in the kernel's cache only (a process that stopped with `--fsync
            // interval`): synced before a mark may say it is on disk.
            guard fdatasync(descriptor) == 0 else {
                let reason = String(cString: strerror(errno))
                Glibc.close(descriptor)
                throw StartupError("cannot sync the journal \(path): \(reason)")
            }
            return Segment(number: number, descriptor: descriptor, size: size)
        }
        let temporary = directory.temporarySegmentPath(number)
        let descriptor = open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw StartupError("cannot create the journal \(temporary): \(String(cString: strerror(errno)))")
        }
        guard writeAll(descriptor, JournalFormat.header, at: 0), fdatasync(descriptor) == 0,
            rename(temporary, path) == 0
        else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            unlink(temporary)
            throw StartupError("cannot write the journal \(path): \(reason)")
        }
        // Records go into the segment only once its name is durable: were the rename lost, they would stand in
        // a file that the next start takes for a segment left being made.
        guard directory.syncDirectory() else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw StartupError("cannot sync the data directory after making the journal \(path): \(reason)")
        }
        return Segment(number: number, descriptor: descriptor, size: JournalFormat.headerSize)
    }

    // MARK: Journal

    /// Down while writes or syncs fail (from a failure until one of its kind succeeds); nil while they succeed, as
    /// for any local journal.
    var storeState: StoreState? { isFailing ? .down : nil }

    private var isFailing: Bool { failures.isFailing || syncFailures.isFailing }

    func metricsText() -> String {
        "# HELP changeserver_store_up 1 while the journal's writes succeed, 0 from a failed write or fsync until one "
            + "succeeds.\n# TYPE changeserver_store_up gauge\nchangeserver_store_up \(isFailing ? 0 : 1)\n"
    }

    func append(_ record: [UInt8], then done: @escaping @Sendable (Bool) -> Void) throws(StorageError) {
        guard record.count <= recordLimit else { throw .recordTooLarge(bytes: record.count, limit: recordLimit) }
        let frameSize = record.count + JournalFormat.frameHeaderSize
        guard policy == .always else {
            // Written at once and called back at once, under one lock, so that records written by different
            // threads are applied in the order they stand in the file.
            try ordering.withLock { _ throws(StorageError) in
                try state.withLock { state throws(StorageError) in
                    let segment = state.segment
                    var frame: [UInt8] = []
                    if let synced = state.unmarkedSync {
                        JournalFormat.appendFrame(JournalFormat.mark(synced: synced), at: segment.size, to: &frame)
                    }
                    JournalFormat.appendFrame(record, at: segment.size + frame.count, to: &frame)
                    guard Self.writeAll(segment.descriptor, frame, at: segment.size) else {
                        let reason = String(cString: strerror(errno))
                        _ = ftruncate(segment.descriptor, off_t(segment.size))
                        failures.failed(reason, mutations: 1)
                        throw .unavailable(reason: reason)
                    }
                    failures.succeeded()
                    segment.size += frame.count
                    state.unmarkedSync = nil
                    state.bytesSinceSnapshot += frame.count
                    state.written += 1
                    metrics.setJournalBytes(state.bytesSinceSnapshot)
                }
                done(true)
            }
            return
        }
        // Group commit: the syncer writes and syncs everything buffered in one go, then calls back in order. A
        // failed write surfaces as a failed sync, before anything of it was applied.
        let wakeSyncer = state.withLock { state in
            state.buffer.append(record)
            state.bytesSinceSnapshot += frameSize
            state.written += 1
            state.pending.append((state.written, done))
            metrics.setJournalBytes(state.bytesSinceSnapshot)
            defer { state.syncerIsIdle = false }
            return state.syncerIsIdle
        }
        if wakeSyncer { self.wakeSyncer() }
    }

    func flush() {
        guard policy == .always else {
            ordering.withLock { _ in
                let (segment, size) = state.withLock { ($0.segment, $0.segment.size) }
                if fdatasync(segment.descriptor) == 0 {
                    markSynced(segment, size)
                } else {
                    state.withLock { state in if state.segment === segment { state.isUnmarkable = true } }
                }
            }
            return
        }
        // The syncer does the work (it alone runs callbacks, so that they stay in order): wake it and wait, at
        // most 1.5 s, so that a stop stays within its bounds; what is still unsynced then is awaited by the loops
        // for a while, then let go unanswered (`HTTPServer.awaitSubmitted`): its record may yet reach the disk.
        let done = DispatchSemaphore(value: 0)
        let isDone = state.withLock { state in
            if state.synced == state.written && state.syncerIsIdle { return true }
            state.flushWaiters.append(done)
            return false
        }
        guard !isDone else { return }
        wakeSyncer()
        _ = done.wait(timeout: .now() + .milliseconds(1500))
    }

    /// Flushes, then stops the syncer or interval thread and waits for it to return (at shutdown, after the last
    /// `append`).
    func close() {
        flush()
        state.withLock { $0.isClosing = true }
        wakeSyncer()
        closing.signal()
        thread.withLock { $0 }?.join()
        if markAtClose() { RunRecord.write(directory, policy: policy, closed: true, logger: logger) }
    }

    /// Ends the segment with a sync mark naming its size, synced, when all of it is known to be on disk: so that
    /// damage to the last records written before a stop is refused at the next start, not cut as a torn write.
    /// True when everything written is on disk (the run is closed: `RunRecord`), mark or not.
    private func markAtClose() -> Bool {
        ordering.withLock { _ in
            state.withLock { state in
                let isSynced =
                    policy == .always
                    ? state.synced == state.written && state.syncedSize == state.segment.size
                    : state.unmarkedSync == state.segment.size || state.segment.size <= JournalFormat.headerSize
                guard isSynced, state.segment.size > JournalFormat.headerSize, !Self.endWithMark(&state) else {
                    return isSynced
                }
                // A mark written in part (a full disk) would read as a torn record at the next start, which cuts
                // it and, since a cut may drop answered records, renews every epoch (`EpochRenewal`): cut it here.
                let segment = state.segment
                if ftruncate(segment.descriptor, off_t(segment.size)) == 0 {
                    segment.zeroedEnd = segment.size
                    _ = fdatasync(segment.descriptor)
                }
                return true
            }
        }
    }

    /// Writes a sync mark naming the current segment's end at that end, and syncs it; false when either fails.
    /// Everything before the end must be on disk.
    private static func endWithMark(_ state: inout State) -> Bool {
        let segment = state.segment
        let mark = JournalFormat.frame(JournalFormat.mark(synced: segment.size), at: segment.size)
        guard writeAll(segment.descriptor, mark, at: segment.size), fdatasync(segment.descriptor) == 0 else {
            return false
        }
        segment.size += mark.count
        state.syncedSize = segment.size
        state.unmarkedSync = nil
        return true
    }

    /// Cuts the zeros written ahead of a closed segment's end (up to 2 MiB, `zeroAhead`): no record will take
    /// them, and on a disk short of room, which is when a snapshot is due for space, the new segment and the
    /// snapshot need their room. Kept, they left a small disk full for good: every compaction failed to start the
    /// new segment. A cut lost in a crash only brings zeros back after the segment's closing mark, where recovery
    /// reads them as the end.
    private static func dropZerosAhead(of segment: Segment) {
        guard segment.zeroedEnd > segment.size, ftruncate(segment.descriptor, off_t(segment.size)) == 0 else { return }
        segment.zeroedEnd = segment.size
    }

    /// Notes that `segment` is on disk up to `size` (`--fsync interval` and `never`), for the next record's mark.
    private func markSynced(_ segment: Segment, _ size: Int) {
        state.withLock { state in
            guard state.segment === segment, !state.isUnmarkable, size > JournalFormat.headerSize else { return }
            state.unmarkedSync = max(state.unmarkedSync ?? 0, size)
        }
    }

    private func wakeSyncer() {
        var one: UInt8 = 1
        _ = Glibc.write(wake.write, &one, 1)
    }

    var bytesSinceSnapshot: Int { state.withLock { $0.bytesSinceSnapshot } }

    /// With `--fsync always` the syncer calls back, after each pass and outside the lock; otherwise `append` does,
    /// holding `ordering`.
    var callsBackOnItsOwnThread: Bool { policy == .always }

    /// Starts a new segment, then calls `snapshot` with its number (nil if it could not be made) at a moment when
    /// every record of the older segments has been handed to its lane and no later one has: if `snapshot` queues
    /// its copies on the lanes before it returns, what they see is what a snapshot covering the older segments
    /// must hold. Callable from any thread but an `append` callback: with `--fsync always` the switch happens on
    /// the syncer thread between two batches (it alone calls back); otherwise at once, holding writes and their
    /// callbacks off until `snapshot` returns.
    func rotate(then snapshot: @escaping @Sendable (UInt64?) -> Void) {
        guard policy == .always else {
            ordering.withLock { _ in
                let segment = state.withLock { $0.segment }
                guard fdatasync(segment.descriptor) == 0 else {
                    logger.error("cannot sync the journal before a new segment: \(String(cString: strerror(errno)))")
                    return snapshot(nil)
                }
                snapshot(switchSegment())
            }
            return
        }
        state.withLock { $0.rotation = snapshot }
        wakeSyncer()
    }

    /// Opens the next segment and makes it current; nil (logged) when it cannot be created.
    /// The current segment, all of it on disk, is closed with a mark naming its end first: recovery requires that
    /// mark of every segment but the last, so that the loss of a segment's last records cannot go unnoticed.
    private func switchSegment() -> UInt64? {
        let next = state.withLock { $0.segment.number + 1 }
        guard state.withLock({ Self.endWithMark(&$0) }) else {
            logger.error("cannot close the journal segment: \(String(cString: strerror(errno)))")
            return nil
        }
        Self.dropZerosAhead(of: state.withLock { $0.segment })
        let segment: Segment
        do throws(StartupError) {
            segment = try Self.openSegment(directory, next, size: 0)
        } catch {
            logger.error("cannot start a new journal segment: \(error)")
            return nil
        }
        JournalHead.record(next, in: directory, logger: logger)
        state.withLock { state in
            state.segment = segment
            state.syncedSize = segment.size
            state.unmarkedSync = nil
            state.isUnmarkable = false
            state.bytesSinceSnapshot = state.buffer.reduce(0) { $0 + $1.count + JournalFormat.frameHeaderSize }
            metrics.setJournalBytes(state.bytesSinceSnapshot)
        }
        return next
    }

    // MARK: Syncing

    /// What the syncer keeps from pass to pass, so that a pass in the steady state takes nothing from malloc: a
    /// batch's arrays (some kB each) taken anew on every pass made malloc consolidate its free lists each time.
    private struct SyncerBuffers {
        /// The pass's records, swapped with `State.buffer` (which gets this array back, empty).
        var records: [[UInt8]] = []
        /// The bytes the pass writes: a sync mark, then the records' frames.
        var frames: [UInt8] = []
        /// The callbacks of the records the pass synced.
        var ready: [(ticket: UInt64, done: @Sendable (Bool) -> Void)] = []
        /// The most bytes of frames kept between passes: a buffer grown past it by large records is let go once
        /// written, not kept for the next write (which may never come).
        static let keptFrameBytes = 1 << 20
    }

    /// One pass of the syncer (`--fsync always`): syncs what is buffered, then performs a requested rotation.
    private func syncPass(_ buffers: inout SyncerBuffers) {
        let (segment, target, offset) = state.withLock { state in
            swap(&buffers.records, &state.buffer)
            return (state.segment, state.written, state.segment.size)
        }
        if !buffers.records.isEmpty { sync(upTo: target, in: segment, at: offset, &buffers) }
        buffers.records.removeAll(keepingCapacity: true)
        if let rotation = state.withLock({ state in
            defer { state.rotation = nil }
            return state.rotation
        }) {
            rotation(switchSegment())
        }
    }

    /// Writes `buffers.records` (the tickets up to `target`) at `offset` after a sync mark, syncs, and runs their
    /// callbacks in order (all failed when the write or the sync failed).
    private func sync(upTo target: UInt64, in segment: Segment, at offset: Int, _ buffers: inout SyncerBuffers) {
        // Framed here, where each record's offset in the file is known, after a mark: everything before this pass
        // is on disk (the last pass's sync succeeded, or a failed one cut the segment back to what was).
        let recordBytes = buffers.records.reduce(0) { $0 + $1.count + JournalFormat.frameHeaderSize }
        buffers.frames.removeAll(keepingCapacity: true)
        buffers.frames.reserveCapacity(JournalFormat.markFrameSize + recordBytes)
        JournalFormat.appendFrame(JournalFormat.mark(synced: offset), at: offset, to: &buffers.frames)
        for record in buffers.records {
            JournalFormat.appendFrame(record, at: offset + buffers.frames.count, to: &buffers.frames)
        }
        let written = buffers.frames.count
        let started = MonotonicClock.nanoseconds()
        var succeeded = Self.writeAll(segment.descriptor, buffers.frames, at: offset)
        if succeeded {
            Self.zeroAhead(segment, from: offset + written)
            succeeded = fdatasync(segment.descriptor) == 0
        }
        let reason = succeeded ? "" : String(cString: strerror(errno))
        if buffers.frames.capacity > SyncerBuffers.keptFrameBytes { buffers.frames = [] }
        metrics.fsyncTook(seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
        state.withLock { state in
            if succeeded {
                segment.size = offset + written
                state.syncedSize = segment.size
                state.bytesSinceSnapshot += JournalFormat.markFrameSize
            } else {
                // After a failed write or fsync the kernel may have dropped dirty pages: cut the segment back
                // to what is known durable, and sync the cut (a rotation may come before the next sync); the
                // records of this batch are dropped, none of them was applied.
                _ = ftruncate(segment.descriptor, off_t(state.syncedSize))
                _ = fdatasync(segment.descriptor)
                segment.size = state.syncedSize
                segment.zeroedEnd = state.syncedSize
                state.bytesSinceSnapshot = max(0, state.bytesSinceSnapshot - recordBytes)
            }
            state.synced = target
            // After the sync mark a success adds, or the records a failure takes back (counted as they came, the
            // gauge kept them until the next write). Set under the lock, as every setting of it is, so that a
            // value read before this one cannot be set after it.
            metrics.setJournalBytes(state.bytesSinceSnapshot)
            // Copied out rather than sliced: an array made of a slice of the whole buffer shares it, and the
            // removal then copies what is left into a new one.
            let split = state.pending.partitioningIndex { $0.ticket > target }
            buffers.ready.append(contentsOf: state.pending[..<split])
            state.pending.removeFirst(split)
        }
        if succeeded {
            failures.succeeded()
        } else {
            failures.failed(reason, mutations: buffers.ready.count)
        }
        for entry in buffers.ready { entry.done(succeeded) }
        buffers.ready.removeAll(keepingCapacity: true)
    }

    private func syncLoop() {
        // Allocated once: a buffer this size taken from malloc on every wake made it consolidate its free lists.
        var drained = [UInt8](repeating: 0, count: 4096)
        var buffers = SyncerBuffers()
        while true {
            _ = read(wake.read, &drained, drained.count)
            while state.withLock({ state in
                if state.written > state.synced || state.rotation != nil { return true }
                state.syncerIsIdle = true
                return false
            }) {
                syncPass(&buffers)
            }
            let (waiters, isClosing) = state.withLock { state in
                defer { state.flushWaiters = [] }
                return (state.flushWaiters, state.isClosing)
            }
            for waiter in waiters { waiter.signal() }
            if isClosing { return }
        }
    }

    private func intervalLoop() {
        while closing.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            let (segment, size, written, synced) = state.withLock {
                ($0.segment, $0.segment.size, $0.written, $0.synced)
            }
            guard written > synced else { continue }
            let started = MonotonicClock.nanoseconds()
            if fdatasync(segment.descriptor) == 0 {
                state.withLock { $0.synced = max($0.synced, written) }
                markSynced(segment, size)
                syncFailures.succeeded()
            } else {
                // The mutations were answered already (`--fsync interval`): none is answered 503 for it.
                syncFailures.failed(String(cString: strerror(errno)), mutations: 0)
                state.withLock { state in if state.segment === segment { state.isUnmarkable = true } }
            }
            metrics.fsyncTook(seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
        }
    }

    /// Writes zeros ahead of `end` when it comes within half a chunk of the zeros written before
    /// (`JournalFormat.preallocation`). Only an optimization: when the zeros cannot be written (a full disk), the
    /// records are synced as appends, and the next pass tries again from what the file now holds.
    private static func zeroAhead(_ segment: Segment, from end: Int) {
        guard end > segment.zeroedEnd - JournalFormat.preallocation / 2 else { return }
        let start = max(end, segment.zeroedEnd)
        let target = (end / JournalFormat.preallocation + 2) * JournalFormat.preallocation
        if writeAll(segment.descriptor, [UInt8](repeating: 0, count: target - start), at: start) {
            segment.zeroedEnd = target
        } else {
            var info = stat()
            segment.zeroedEnd = fstat(segment.descriptor, &info) == 0 ? max(end, Int(info.st_size)) : end
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
