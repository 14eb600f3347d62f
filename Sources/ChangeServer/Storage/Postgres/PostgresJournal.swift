import Dispatch
import Glibc
import Model
import Synchronization

/// The journal in PostgreSQL, shared by every server on the same database (`--postgres URL`).
///
/// Writing: a writer thread takes every record appended meanwhile and commits them in one transaction (group
/// commit): per collection, in name order (so two servers never wait on each other's rows in a cycle), one
/// statement raises the collection's `last_seq` and inserts its records with the sequences it covers; then `COMMIT`;
/// then a `NOTIFY` (in a transaction of its own) wakes the other servers. A record's callback runs only after the
/// commit, through `SequencedDelivery`, which also hands on the records of other servers, so every server applies
/// each collection's records in the same order. A batch that moves a view to another source takes the row of the
/// source it leaves too, before any id, and notes itself there (`PostgresSchema.lockCollection`, `markLeft`): the
/// records of that source are then in id order with the move, on every server. It is handed on once the follower
/// has read the source it leaves, and the later batches that touch its collections behind it (`handOn`); a batch
/// whose collection a move not applied here left waits the same way.
///
/// Following: a follower thread `LISTEN`s and, on each notification, reads the new records of the collections it
/// names (all of them instead, in one snapshot, when those hold a view's record or were left by a move not applied
/// here, see `follow`); every second, and after each reconnection, it compares every collection's `last_seq` with
/// what was applied and reads what is missing (a notification may be lost with a connection).
///
/// While the database is unreachable, appends throw `StorageError.unavailable` at once (`503`), records in flight
/// are reported not durable, and both threads reconnect with capped, jittered backoff.
///
/// Its parts live in extensions, a file each (`+Writing`, `+HandingOn`, `+Snapshots`, `+Following`), so the state
/// they share is internal rather than private: keep every use of it inside these files (the compiler does not).
final class PostgresJournal: Journal {
    struct Queue {
        var pending: [(collection: String, local: SequencedDelivery.Local)] = []
        var isCommitting = false
        var writerIsIdle = true
        var flushWaiters: [DispatchSemaphore] = []
        var isClosing = false
        /// Collections whose records of other servers the follower should read now.
        var toFollow: Set<String> = []
        /// Committed batches of this server not handed on yet, in commit order: one that moves a view to another
        /// source waits until the follower has read the source it leaves (`readLeftSources`), and those after it
        /// that touch its collections wait behind it (`releaseReadBatches`).
        var committed: [CommittedBatch] = []
        var lastBatchID = 0
        /// Set by the follower when its connection broke: the writer's, idle and so untested, is likely broken
        /// too. The writer reconnects at once, so that the store is reported down while the database is, and the
        /// first write after an outage does not meet a dead connection.
        var writerConnectionSuspect = false
        /// Set a while after a snapshot ended with snapshots still owed (`owedSnapshots`): the writer, idle or not,
        /// tries them again.
        var owedSnapshotsDue = false
        /// Whether that while is running: one at a time, however many snapshots end meanwhile (a timer each made
        /// the retries of several failing snapshots multiply).
        var owedSnapshotsTimed = false
        /// When the writer sent the batch it waits for (monotonic milliseconds), and its record bytes; nil while
        /// it waits for none.
        var commitStarted: (at: Int64, bytes: Int)?
        /// Set by the watchdog when that wait went past `stallLimit`: the store is reported down until it ends.
        var isStalled = false
        /// When the follower sent the round trip it waits for the database to answer (monotonic milliseconds), and
        /// its connection's socket; nil while it waits for none (`PGConnection.roundTrips`). Cleared under this
        /// lock once the round trip returns, before the connection can be closed, so that the watchdog never ends
        /// a socket that is not the follower's.
        var followerReading: (since: Int64, socket: Int32)?
    }

    /// A run of one collection's records: its name, the sequence of the first, and how many.
    typealias Range = (name: String, first: Int64, count: Int)

    let delivery: SequencedDelivery
    let metrics: StoreMetrics
    let url: String
    let logger: Logger
    /// Tells notifications of this server's own commits from those of others.
    let origin: String
    let catchUpInterval: Int64
    /// Record bytes a page the follower reads holds at most, but for its first record (`PostgresSchema.pageBytes`).
    let pageBytes: Int
    let queue = Mutex(Queue())
    let writerWake = DispatchSemaphore(value: 0)
    /// A pipe that wakes the follower out of `poll`: written by `close` and by the writer.
    let followerWake: (read: Int32, write: Int32)
    private let threads = Mutex<[JoinableThread]>([])
    /// Record bytes this server committed per collection after which it snapshots that collection.
    let snapshotBytes: Int
    /// Milliseconds between a collection's deletion and the purge of its records: long enough for every running
    /// server to have read them (one that has not stops and starts again, as after any compaction it missed).
    let purgeDelay: Int64
    /// The source collection of a view, as this server has applied its records (nil: no such view).
    let viewSource: @Sendable (String) -> String?
    /// What a snapshot of one sequence key holds: the collection of that name (nil: it does not exist) and the
    /// views it feeds, copied together on its lane.
    typealias Copy = (content: VersionedCollection?, views: [SnapshotFile.SavedView])
    /// Copies a collection and its views on its lane, handing them to the closure there.
    typealias Copier = @Sendable (String, @escaping @Sendable (Copy) -> Void) -> Void
    let copier = Mutex<Copier?>(nil)
    /// Writes snapshots and purges, one at a time, on a connection of its own.
    let housekeeper: Housekeeper
    /// Collections being snapshotted now (from their copy until their snapshot is stored or has failed).
    let snapshotting = Mutex<Set<String>>([])
    /// Collections owed a snapshot and not snapshotted since (one was being snapshotted already, or the snapshot
    /// failed): tried again with the next batch, or a second after a snapshot ends (`trySnapshotsOwedLater`). Those
    /// deleted by a committed record, so that their records are purged; and the new sources of views this server
    /// moved (`snapshotIfGrown`).
    let owedSnapshots = Mutex<Set<String>>([])
    /// Collections the start owes a snapshot (`snapshotAfterStart`), stored without deleting the records behind it,
    /// unless they have grown by `snapshotBytes` meanwhile: compacted, they would send every other server more than
    /// `keptRecords` behind (one still replaying its own start, in a rolling restart) into a restart from the
    /// snapshot. Those records go with the collection's next snapshot.
    let startSnapshots = Mutex<Set<String>>([])
    /// Snapshots that failed in a row (none stored since): the wait before one is tried again doubles with them,
    /// from a second up to a minute.
    let snapshotFailures = Mutex(0)
    /// When each collection whose snapshot failed may be tried again (monotonic milliseconds): not with every
    /// batch before then, which asked a full disk, and logged its refusal, for each batch.
    let snapshotRetryAt = Mutex<[String: Int64]>([:])
    /// What the log last said of the writer's commits (`sayCommitState`); the writer's alone, in a `Mutex` for the
    /// journal to stay `Sendable`.
    let commitLog = Mutex(CommitStateLog())
    /// Told (once) when this server cannot catch up with a collection: its records were compacted into a snapshot.
    let fallenBehind = Mutex<(@Sendable (String) -> Void)?>(nil)
    /// Milliseconds a commit may go unanswered before the store is taken as down (`--postgres-timeout`), and one
    /// more per MB of the batch's records (a batch of large records takes a while to send).
    private let stallLimit: Int64
    /// Wakes the watchdog thread, which looks at the writer's commit once a second (`watchCommit`), to stop.
    private let watchdogWake = DispatchSemaphore(value: 0)

    /// `applied`: the last sequence of each collection that recovery applied.
    init(
        url: String, applied: [String: Int64], snapshotBytes: Int, purgeDelay: Int64, stallLimit: Int64 = 10_000,
        catchUpInterval: Int64 = 1000, pageBytes: Int = PostgresSchema.pageBytes,
        viewSource: @escaping @Sendable (String) -> String?, logger: Logger
    ) throws(StartupError) {
        self.url = url
        self.stallLimit = stallLimit
        self.viewSource = viewSource
        self.snapshotBytes = snapshotBytes
        self.purgeDelay = purgeDelay
        self.logger = logger
        self.catchUpInterval = catchUpInterval
        self.pageBytes = max(1, pageBytes)
        delivery = SequencedDelivery(applied: applied, logger: logger)
        metrics = StoreMetrics()
        origin = String(UInt64.random(in: 1...UInt64.max), radix: 36)
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw StartupError("cannot create the PostgreSQL follower's wake-up pipe") }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        followerWake = (ends[0], ends[1])
        housekeeper = Housekeeper(url: url)
    }

    deinit {
        Glibc.close(followerWake.read)
        Glibc.close(followerWake.write)
    }

    /// Starts the writer and the follower; records of other servers go to `applyRemote`, in order; `copyOnLane`
    /// copies a collection and its views on its lane for a snapshot.
    ///
    /// `fellBehind` is called (on the follower's thread) when the records of a collection that this server has not
    /// applied yet were compacted into a snapshot by another server: it cannot go on with that collection, and
    /// serving it as it is would serve stale data for good.
    func start(
        applyingRemote applyRemote: @escaping @Sendable (JournalRecord, _ bytes: Int) -> Void,
        copyOnLane: @escaping @Sendable (String, @escaping @Sendable (Copy) -> Void) -> Void,
        fellBehind: @escaping @Sendable (String) -> Void
    ) {
        copier.withLock { $0 = copyOnLane }
        fallenBehind.withLock { $0 = fellBehind }
        delivery.start(applyingRemote: { [metrics] record, bytes in
            metrics.appliedRemote(1)
            applyRemote(record, bytes)
        })
        _ = metrics.setUp(true)
        threads.withLock {
            $0 = [
                JoinableThread { [self] in writeLoop() }, JoinableThread { [self] in followLoop() },
                JoinableThread { [self] in
                    while watchdogWake.wait(timeout: .now() + 1) == .timedOut {
                        watchCommit()
                        watchFollower()
                    }
                },
            ]
        }
    }

    /// Takes the store as down when PostgreSQL has not answered the writer's commit within `stallLimit`: a
    /// database that hangs without closing its connections (frozen, or stuck on its disk) held every mutation,
    /// queued or new, with no bound, while `/healthz` said "up". New mutations get `503` at once then, and those
    /// queued behind the commit are reported not durable (none was sent); the commit's own mutations wait for its
    /// outcome, which only the database can tell. The store is up again once it answers.
    private func watchCommit() {
        let now = MonotonicClock.now()
        // The store goes down under the lock that `append` and the writer take: an append that finds it up queues
        // its record before this empties the queue, and the writer cannot put the store up again in between.
        let (stalled, failed, wentDown) = queue.withLock {
            queue -> (Int64?, [(collection: String, local: SequencedDelivery.Local)], Bool) in
            guard let started = queue.commitStarted, !queue.isStalled,
                now - started.at >= stallLimit + Int64(started.bytes >> 20) * 1000
            else { return (nil, [], false) }
            queue.isStalled = true
            defer { queue.pending = [] }
            return (now - started.at, queue.pending, metrics.setUp(false))
        }
        guard let stalled else { return }
        if wentDown {
            logger.error(
                "PostgreSQL has not answered a commit for \(stalled / 1000) s: mutations answer 503 until it does "
                    + "(\(failed.count) queued behind it are not written; those it holds are answered once it is known "
                    + "whether it committed)")
        }
        for record in failed { record.local.done(false) }
    }

    /// Takes the store as down when a round trip of the follower has gone unanswered for `stallLimit`, nothing
    /// arriving on its socket meanwhile (a page of large records that takes long to come is still coming), and ends
    /// its connection so that it reads again on a new one: a backend that hung (frozen, or stuck) held the follower
    /// with no bound, and with it every write through this server to a collection other servers write too (applied
    /// in the database's order, such a write waits for their records before it), while `/healthz` said "up". New
    /// mutations answer `503` until the follower has read on a new connection.
    private func watchFollower() {
        let now = MonotonicClock.now()
        // The store goes down under the lock the follower takes to put it up again: the follower cannot read again
        // on a new connection between the two, which would leave the store down for good.
        let (stalled, wentDown) = queue.withLock { queue -> (Int64?, Bool) in
            guard let reading = queue.followerReading, now - reading.since >= stallLimit,
                TCPInfo.millisecondsSinceDataArrived(on: reading.socket).map({ $0 >= stallLimit }) ?? true
            else { return (nil, false) }
            queue.followerReading = nil
            // Its `PQgetResult` returns with an error, and the follower connects again.
            PGConnection.endSocket(reading.socket)
            return (now - reading.since, metrics.setFollowerStalled(true))
        }
        if let stalled, wentDown {
            logger.error(
                "PostgreSQL has not answered the follower for \(stalled / 1000) s: its connection is ended and made "
                    + "again; mutations answer 503 until it reads")
        }
    }

    /// Has the follower's connection note each of its round trips for `watchFollower`.
    func watchRoundTrips(of connection: PGConnection) {
        let socket = connection.socket
        connection.roundTrips = { [self] waiting in
            let reading = waiting ? (since: MonotonicClock.now(), socket: socket) : nil
            queue.withLock { $0.followerReading = reading }
        }
    }

    // MARK: Journal

    func append(_ record: [UInt8], then done: @escaping @Sendable (Bool) -> Void) throws(StorageError) {
        guard record.count <= JournalFormat.maximumPayload else {
            throw .recordTooLarge(bytes: record.count, limit: JournalFormat.maximumPayload)
        }
        guard metrics.triesWrites else { throw .unavailable(reason: "PostgreSQL cannot be written to") }
        let collection = RecordCodec.sequenceKey(of: record, viewSource: viewSource) ?? ""
        let wakeWriter = try queue.withLock { queue throws(StorageError) in
            // Checked again under the lock: a record queued once the watchdog emptied the queue would wait behind
            // the frozen commit with no bound.
            guard !queue.isStalled else { throw .unavailable(reason: "PostgreSQL does not answer") }
            queue.pending.append((collection, SequencedDelivery.Local(record: record, done: done)))
            defer { queue.writerIsIdle = false }
            return queue.writerIsIdle
        }
        if wakeWriter { writerWake.signal() }
    }

    /// Waits for what was appended to be committed, at most 1.5 s (a stop calls it, and a database that does not
    /// answer must not hold the stop up): what is still uncommitted then is awaited by the loops for a while, then
    /// let go unanswered (`HTTPServer.awaitSubmitted`), and the next start finds whether it committed.
    func flush() {
        let waiter = DispatchSemaphore(value: 0)
        let mustWait = queue.withLock { queue in
            guard !queue.pending.isEmpty || queue.isCommitting else { return false }
            queue.flushWaiters.append(waiter)
            return true
        }
        if mustWait { _ = waiter.wait(timeout: .now() + .milliseconds(1500)) }
    }

    /// Stops the writer, the follower and the housekeeper (whose queued snapshots and purges are dropped: a later
    /// server makes them), waiting at most 3 s for all three: one blocked in a call to a database that does not
    /// answer is left behind, and the process ends without it.
    func close() {
        flush()
        queue.withLock { $0.isClosing = true }
        watchdogWake.signal()
        writerWake.signal()
        wakeFollower()
        let running = threads.withLock { threads in
            defer { threads = [] }
            return threads
        }
        let deadline = MonotonicClock.now() + 3000
        var answered = housekeeper.close(until: deadline)
        for thread in running where !thread.join(within: Int(max(0, deadline - MonotonicClock.now()))) {
            answered = false
        }
        releaseWaiting()
        if !answered {
            logger.warning(
                "PostgreSQL does not answer (or a snapshot is still being written): stopping without waiting for it "
                    + "any longer")
        }
    }

    var storeState: StoreState? { metrics.takesWrites ? .up : .down }
    var isShared: Bool { true }

    func metricsText() -> String { metrics.render(housekeepingJobs: housekeeper.backlog) }

    /// Held while committed batches are handed on (`releaseReadBatches`).
    let releasing = Mutex(())
}
