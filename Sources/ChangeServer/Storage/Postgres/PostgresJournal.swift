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
final class PostgresJournal: Journal {
    private struct Queue {
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

    let delivery: SequencedDelivery
    let metrics: StoreMetrics
    private let url: String
    private let logger: Logger
    /// Tells notifications of this server's own commits from those of others.
    private let origin: String
    private let catchUpInterval: Int64
    /// Record bytes a page the follower reads holds at most, but for its first record (`PostgresSchema.pageBytes`).
    private let pageBytes: Int
    private let queue = Mutex(Queue())
    private let writerWake = DispatchSemaphore(value: 0)
    /// A pipe that wakes the follower out of `poll`: written by `close` and by the writer.
    private let followerWake: (read: Int32, write: Int32)
    private let threads = Mutex<[JoinableThread]>([])
    /// Record bytes this server committed per collection after which it snapshots that collection.
    private let snapshotBytes: Int
    /// Milliseconds between a collection's deletion and the purge of its records: long enough for every running
    /// server to have read them (one that has not stops and starts again, as after any compaction it missed).
    private let purgeDelay: Int64
    /// The source collection of a view, as this server has applied its records (nil: no such view).
    private let viewSource: @Sendable (String) -> String?
    /// What a snapshot of one sequence key holds: the collection of that name (nil: it does not exist) and the
    /// views it feeds, copied together on its lane.
    typealias Copy = (content: VersionedCollection?, views: [SnapshotFile.SavedView])
    /// Copies a collection and its views on its lane, handing them to the closure there.
    private typealias Copier = @Sendable (String, @escaping @Sendable (Copy) -> Void) -> Void
    private let copier = Mutex<Copier?>(nil)
    /// Writes snapshots and purges, one at a time, on a connection of its own.
    private let housekeeper: Housekeeper
    /// Collections being snapshotted now (from their copy until their snapshot is stored or has failed).
    private let snapshotting = Mutex<Set<String>>([])
    /// Collections owed a snapshot and not snapshotted since (one was being snapshotted already, or the snapshot
    /// failed): tried again with the next batch, or a second after a snapshot ends (`trySnapshotsOwedLater`). Those
    /// deleted by a committed record, so that their records are purged; and the new sources of views this server
    /// moved (`snapshotIfGrown`).
    private let owedSnapshots = Mutex<Set<String>>([])
    /// Told (once) when this server cannot catch up with a collection: its records were compacted into a snapshot.
    private let fallenBehind = Mutex<(@Sendable (String) -> Void)?>(nil)
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
                PGConnection.millisecondsSinceDataArrived(on: reading.socket).map({ $0 >= stallLimit }) ?? true
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
    private func watchRoundTrips(of connection: PGConnection) {
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
        guard metrics.isUp else { throw .unavailable(reason: "PostgreSQL is unreachable") }
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

    var storeState: StoreState? { metrics.isUp ? .up : .down }
    var isShared: Bool { true }

    func metricsText() -> String { metrics.render(housekeepingJobs: housekeeper.backlog) }

    // MARK: Writing

    /// A committed batch of this server, waiting to be handed on (see `handOn`).
    private struct CommittedBatch {
        let id: Int
        let ranges: [Range]
        /// The sources its view records move views away from.
        let sources: Set<String>
        /// Whether those sources were read since it committed (or it waited `movePatience`, or has none).
        var isRead: Bool
        /// What it holds back: of the sources it leaves (`SequencedDelivery.hold`), let go once its records
        /// `after` names are handed on (those it does not hold back itself), or after `movePatience`; and its own
        /// records, until what they follow is handed on, or after `movePatience`.
        let hold: Hold
    }

    /// What a batch holds back (see `CommittedBatch.hold`).
    private struct Hold {
        var barrier: Int?
        var after: [String: Int64] = [:]
        var wait: Int?

        static let none = Hold()
        var tokens: [Int] { [barrier, wait].compactMap { $0 } }
    }

    /// How long a batch that moves a view waits for the follower to read the sources it leaves before it is
    /// handed on without (a follower that cannot read: its connection lost, or its backend stalled).
    static let movePatience = 2000
    /// Held while committed batches are handed on (`releaseReadBatches`).
    private let releasing = Mutex(())

    /// Records whose `COMMIT` got no answer (the connection broke while it ran): they may or may not be in the
    /// database, so their callers wait until a new connection tells.
    private typealias Range = (name: String, first: Int64, count: Int)

    private func writeLoop() {
        var connection: PGConnection?
        /// Whether the writer had a connection and lost it: the next one made counts as a reconnection.
        var lost = false
        var backoff = Backoff()
        var unresolved: [Unanswered] = []
        var bytesSinceSnapshot: [String: Int] = [:]
        defer {
            for range in unresolved.flatMap(\.ranges) {
                for record in delivery.abandon(range.name, first: range.first, count: range.count) {
                    record.done(false)
                }
            }
            // Those the follower saw committed are answered so.
            for token in unresolved.flatMap(\.hold.tokens) { delivery.release(token) }
            handOn(unresolved.flatMap(\.ranges), leaving: [], hold: .none)
        }
        while true {
            if queue.withLock({ queue in
                defer { queue.writerConnectionSuspect = false }
                return queue.writerConnectionSuspect
            }) {
                lost = lost || connection != nil
                connection = nil
            }
            if connection == nil {
                do throws(StorageError) {
                    connection = try connect(resolving: &unresolved)
                    backoff.reset()
                    if lost { metrics.reconnected() }
                    lost = false
                    if metrics.setUp(true) {
                        logger.log(.notice, "PostgreSQL is reachable again: mutations are accepted")
                    }
                } catch {
                    failPending()
                    let wait = backoff.next()
                    logger.log(.debug, "cannot connect to PostgreSQL (\(error)); next try in \(wait) ms")
                    if queue.withLock({ $0.isClosing }) { return }
                    _ = writerWake.wait(timeout: .now() + .milliseconds(wait))
                    continue
                }
            }
            let batch: [(collection: String, local: SequencedDelivery.Local)]? = queue.withLock { queue in
                if queue.pending.isEmpty {
                    queue.writerIsIdle = true
                    queue.isCommitting = false
                    for waiter in queue.flushWaiters { waiter.signal() }
                    queue.flushWaiters = []
                    return queue.isClosing ? nil : []
                }
                defer { queue.pending = [] }
                queue.isCommitting = true
                queue.commitStarted = (MonotonicClock.now(), queue.pending.reduce(0) { $0 + $1.local.record.count })
                return queue.pending
            }
            guard let batch, var current = connection else { return }
            if batch.isEmpty {
                let owedDue = queue.withLock { queue in
                    defer { queue.owedSnapshotsDue = false }
                    return queue.owedSnapshotsDue
                }
                if owedDue {
                    snapshotIfGrown([], [], movedTo: [], &bytesSinceSnapshot)
                    continue
                }
                writerWake.wait()
                continue
            }
            var outcome = commit(batch, on: current, mayResend: true, &bytesSinceSnapshot)
            if case .unsent(let error) = outcome {
                // Nothing of it was committed (no COMMIT was sent), so it may go again, once: a connection that
                // the database ended while it sat idle is found so only by the next batch.
                logger.warning("the connection to PostgreSQL was found broken (\(error)); sending the batch again")
                do throws(StorageError) {
                    current = try connect(resolving: &unresolved)
                    connection = current
                    metrics.reconnected()
                    outcome = commit(batch, on: current, mayResend: false, &bytesSinceSnapshot)
                } catch {
                    logger.error("cannot reconnect to PostgreSQL (\(error)); \(batch.count) records not committed")
                    for record in batch { record.local.done(false) }
                }
            }
            if case .unanswered(let batch) = outcome { unresolved.append(batch) }
            let cameBack = queue.withLock { queue in
                defer {
                    queue.commitStarted = nil
                    queue.isStalled = false
                }
                return queue.isStalled && !current.isBroken && metrics.setUp(true)
            }
            if cameBack { logger.log(.notice, "PostgreSQL answers again: mutations are accepted") }
            if current.isBroken {
                connection = nil
                lost = true
                if metrics.setUp(false) {
                    logger.error("lost the connection to PostgreSQL: mutations answer 503 until it is back")
                }
            }
        }
    }

    /// A new connection, on which the records whose `COMMIT` got no answer are resolved first.
    private func connect(resolving unresolved: inout [Unanswered]) throws(StorageError) -> PGConnection {
        let fresh = try PGConnection(url, role: "writer")
        try resolve(&unresolved, on: fresh)
        return fresh
    }

    /// While the database is unreachable: what was appended before that was noticed is not durable.
    private func failPending() {
        if metrics.setUp(false) {
            logger.error("PostgreSQL is unreachable: mutations answer 503 until it is back")
        }
        let (failed, waiters) = queue.withLock { queue in
            defer {
                queue.pending = []
                queue.flushWaiters = []
                queue.isCommitting = false
                queue.writerIsIdle = true
            }
            return (queue.pending, queue.flushWaiters)
        }
        for record in failed { record.local.done(false) }
        for waiter in waiters { waiter.signal() }
    }

    /// Tells the callers of records whose `COMMIT` got no answer what became of them: the rows that are there with
    /// their bytes committed; the others were rolled back and are not durable. Each batch leaves `batches` once
    /// resolved: a connection that breaks partway leaves the others for the next one, which would otherwise hand
    /// the first ones on again (and wait for their reads again).
    private func resolve(_ batches: inout [Unanswered], on connection: PGConnection) throws(StorageError) {
        while let batch = batches.first {
            var rolledBack = false
            for range in batch.ranges {
                let result = try connection.execute(
                    PostgresSchema.recordsAfter,
                    [.text(range.name), .int64(range.first - 1), .int64(Int64(range.count))])
                let rows = (0..<result.rows).map {
                    (seq: result.int64($0, 0), record: result.bytes($0, 1), id: Int64?.none)
                }
                var failed = delivery.offer(range.name, rows).failed
                failed += delivery.abandon(range.name, first: range.first, count: range.count)
                for record in failed { record.done(false) }
                rolledBack = rolledBack || !failed.isEmpty
                // Rows at those sequences may be another server's records (this transaction rolled back, and
                // another took the sequences): only this server's bytes count, which are the ones not failed.
                logger.warning(
                    "collection \(range.name): \(range.count) records whose commit got no answer: "
                        + "\(range.count - failed.count) were committed")
            }
            // The rows found are this server's records, committed: handed on in their turn among its batches,
            // after the reads they wait for, as at a commit; and the new sources of their moves are owed snapshots.
            owedSnapshots.withLock { $0.formUnion(batch.movedTo) }
            // Rolled back, it orders nothing, and the sequences it held back behind may never be filled: what it
            // holds back goes now.
            if rolledBack { for token in batch.hold.tokens { delivery.release(token) } }
            handOn(batch.ranges, leaving: batch.leaving, hold: rolledBack ? .none : batch.hold)
            batches.removeFirst()
        }
        trySnapshotsOwedLater()
    }

    /// A batch whose `COMMIT` got no answer: its ranges, and what `handOn` and `snapshotIfGrown` would have been
    /// given at its commit.
    private struct Unanswered {
        let ranges: [Range]
        let leaving: Set<String>
        let movedTo: Set<String>
        /// What the batch holds back (`CommittedBatch.hold`).
        let hold: Hold
    }

    /// What became of a batch sent to the database.
    private enum CommitOutcome {
        case committed
        /// Not committed, and every record's caller was told.
        case failed
        /// The connection broke during `COMMIT`: resolved on the next connection.
        case unanswered(Unanswered)
        /// The connection was found broken before `COMMIT` was sent: nothing was committed and nobody was told.
        case unsent(StorageError)
    }

    /// Commits `batch` in one transaction. When it does not commit, every record of it that was not seen committed
    /// by the follower is reported not durable, except when the connection broke during `COMMIT` (those are
    /// returned, to be resolved on the next connection) and, with `mayResend`, when it was found broken by the
    /// first round trip (the batch may be sent again, whole, on a new connection).
    ///
    /// Two round trips (libpq's pipeline mode): `BEGIN` and the appends, which tell each collection's sequences;
    /// then `COMMIT` and the wake-up. `COMMIT` is never sent with the appends: were the connection to break after
    /// it, the sequences the records got would be unknown, and they could not be resolved.
    private func commit(
        _ batch: [(collection: String, local: SequencedDelivery.Local)], on connection: PGConnection,
        mayResend: Bool, _ bytesSinceSnapshot: inout [String: Int]
    ) -> CommitOutcome {
        let started = MonotonicClock.nanoseconds()
        var byCollection: [String: [SequencedDelivery.Local]] = [:]
        for record in batch { byCollection[record.collection, default: []].append(record.local) }
        let names = byCollection.keys.sorted()
        var assigned: [Range] = []
        let appends = names.map { name in
            let records = byCollection[name] ?? []
            return (
                sql: PostgresSchema.append,
                parameters: [PGParameter.text(name), .int64(Int64(records.count)), .byteArrays(records.map(\.record))]
            )
        }
        // The batch's view records, read once; their views' rows first, in the order of their names
        // (`PostgresSchema.lockView`).
        let viewRecords = batch.compactMap { entry in
            RecordCodec.viewChange(entry.local.record).map { (view: $0.view, collection: entry.collection) }
        }
        let views = Set(viewRecords.map(\.view)).sorted()
        // Each view's source as noted in the database before this batch, where known; the collections holding
        // a latest record of one of its views that this server has not applied yet; and the sources the batch's
        // moves leave (per view), with the sequence past which their records follow the batch.
        var notedSources: [String: String] = [:]
        var unread: Set<String> = []
        var leaves: [String: Set<String>] = [:]
        var bounds: [String: Int64] = [:]
        var movesAway: [String: (name: String, seq: Int64)] = [:]
        // The records that the batch's own must follow, committed before them (the last of each collection).
        var follows: [String: Int64] = [:]
        func mustFollow(_ name: String, through seq: Int64) {
            guard seq > delivery.applied(name) else { return }
            unread.insert(name)
            follows[name] = max(follows[name] ?? 0, seq)
        }
        do throws(StorageError) {
            var opening: [(sql: String, parameters: [PGParameter])] = [(sql: "BEGIN", parameters: [])]
            if !views.isEmpty {
                // A round trip of its own: the sources the views leave, as the database has them, are locked
                // before any id is taken.
                let locked = connection.pipeline(
                    opening + views.map { (sql: PostgresSchema.lockView, parameters: [PGParameter.text($0)]) })
                _ = try locked[0].get()
                opening = []
                for (view, outcome) in zip(views, locked.dropFirst()) {
                    let noted = try outcome.get()
                    guard noted.rows == 1 else { continue }
                    if !noted.isNull(0, 0) { notedSources[view] = noted.string(0, 0) }
                    if !noted.isNull(0, 1) { mustFollow(noted.string(0, 1), through: noted.int64(0, 2)) }
                }
                for record in viewRecords {
                    let sources = [notedSources[record.view], viewSource(record.view)].compactMap { $0 }
                    leaves[record.view, default: []].formUnion(sources.filter { $0 != record.collection })
                }
            }
            let left = leaves.values.reduce(into: Set<String>()) { $0.formUnion($1) }.sorted()
            let lockedNames = left.isEmpty ? [] : Set(names).union(left).sorted()
            let locks = lockedNames.map { (sql: PostgresSchema.lockCollection, parameters: [PGParameter.text($0)]) }
            let results = connection.pipeline(opening + locks + appends)
            for outcome in results.prefix(opening.count) { _ = try outcome.get() }
            var lockedAt: [String: Int64] = [:]
            for (name, outcome) in zip(lockedNames, results.dropFirst(opening.count)) {
                lockedAt[name] = try outcome.get().int64(0, 0)
            }
            // The records of the sources left up to the lock come first; the batch's own in them go with it.
            for source in left { mustFollow(source, through: lockedAt[source] ?? 0) }
            for (name, outcome) in zip(names, results.dropFirst(opening.count + locks.count)) {
                let records = byCollection[name] ?? []
                let appended = try outcome.get()
                let last = appended.int64(0, 0)
                assigned.append((name, last - Int64(records.count) + 1, records.count))
                // A move away from the collection committed before it: the batch follows it, and waits for the
                // read of the move's collection, so that this server applies the move first, as every server does.
                if !appended.isNull(0, 2) { mustFollow(appended.string(0, 1), through: appended.int64(0, 2)) }
            }
            // The batch's own records of a source it leaves go before its last move away from it when their
            // collection's name comes first (their ids do), and are held back behind the batch when it comes after.
            movesAway = lastMovesAway(byCollection, assigned, leaves)
            for source in left {
                if let own = assigned.first(where: { $0.name == source }) {
                    let before = movesAway[source].map { source < $0.name } ?? true
                    bounds[source] = before ? own.first + Int64(own.count) - 1 : own.first - 1
                } else {
                    bounds[source] = lockedAt[source]
                }
            }
        } catch {
            if mayResend && connection.isBroken { return .unsent(error) }
            logger.error("a PostgreSQL transaction of \(batch.count) records failed: \(error)")
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            for record in batch { record.local.done(false) }
            return .failed
        }
        for range in assigned { delivery.register(range.name, first: range.first, byCollection[range.name] ?? []) }
        // The records of the sources left that commit after this batch wait for it here, as they come after it in
        // the database's order (`PostgresSchema.lockCollection`); set before the commit, which they cannot precede.
        let barrier = bounds.isEmpty ? nil : delivery.hold(bounds)
        // And the batch's own wait for what they follow to be handed on: a read alone does not tell, as a record
        // read may still be held here (behind one of this server's own).
        let wait =
            follows.isEmpty
            ? nil
            : delivery.hold(
                Dictionary(assigned.map { ($0.name, $0.first - 1) }, uniquingKeysWith: min), until: follows)
        // The barrier goes once the batch's records are handed on, but for those it holds back itself.
        let after = Dictionary(
            assigned.filter { $0.count > 0 }.map { ($0.name, $0.first + Int64($0.count) - 1) }, uniquingKeysWith: max
        ).filter { (bounds[$0.key] ?? .max) >= $0.value }
        let hold = Hold(barrier: barrier, after: after, wait: wait)
        let moves = viewMoves(viewRecords)
        // The new sources the batch's moves snapshot: the moves as applied here, and those in the database's order
        // too (of a view whose latest move this server has not read yet).
        let movedTo = Set(moves.map(\.to)).union(
            viewRecords.compactMap { record -> String? in
                guard let noted = notedSources[record.view], noted != record.collection else { return nil }
                return record.collection
            })
        // The batch waits for the read of the sources it leaves, and of the collections holding what it follows, so
        // that this server applies those first, as every server does (it applied its own record first, and then an
        // older move of another server over it).
        let leaving = Set(bounds.keys).union(unread)
        // The wake-up goes in a transaction of its own, after the commit: NOTIFY takes a lock at commit that every
        // notifying transaction of the database shares, and inside the records' transaction it would be held
        // across their WAL flush, making the commits of all servers take turns. A lost wake-up only delays the
        // others until their next catch-up.
        let notes = viewNotes(byCollection, assigned) + leftMarks(movesAway)
        let committed = connection.pipeline(
            notes + [
                (sql: "COMMIT", parameters: []),
                (sql: PostgresSchema.notify, parameters: [.text(PostgresSchema.channel), .text(payload(assigned))]),
            ])
        do throws(StorageError) {
            for outcome in committed.prefix(notes.count + 1) { _ = try outcome.get() }
        } catch {
            guard connection.isBroken else {
                logger.error("a PostgreSQL transaction of \(batch.count) records failed at COMMIT: \(error)")
                // A statement before COMMIT failed, which skipped it: the transaction is still open.
                _ = try? connection.execute("ROLLBACK")
                var failed: [SequencedDelivery.Local] = []
                for range in assigned {
                    failed += delivery.abandon(range.name, first: range.first, count: range.count, rolledBack: true)
                }
                for record in failed { record.done(false) }
                for token in hold.tokens { delivery.release(token) }
                return .failed
            }
            logger.error("the connection broke during COMMIT of \(batch.count) records: resolved on reconnection")
            return .unanswered(Unanswered(ranges: assigned, leaving: leaving, movedTo: movedTo, hold: hold))
        }
        metrics.committed(seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
        if case .failure(let error) = committed[notes.count + 1] {
            logger.warning("NOTIFY after a commit failed (\(error)); the other servers catch up within a second")
        }
        snapshotIfGrown(batch, assigned, movedTo: movedTo, &bytesSinceSnapshot)
        handOn(assigned, leaving: leaving, hold: hold)
        return .committed
    }

    /// For each source a view record of the batch moves its view away from, where the last such record is: it
    /// has the highest id (the records take ids in the order of their collections' names, then sequences).
    private func lastMovesAway(
        _ byCollection: [String: [SequencedDelivery.Local]], _ assigned: [Range], _ leaves: [String: Set<String>]
    ) -> [String: (name: String, seq: Int64)] {
        guard !leaves.isEmpty else { return [:] }
        var moves: [String: (name: String, seq: Int64)] = [:]
        for range in assigned {
            for (offset, record) in (byCollection[range.name] ?? []).enumerated() {
                guard let change = RecordCodec.viewChange(record.record) else { continue }
                for source in leaves[change.view] ?? [] {
                    moves[source] = (range.name, range.first + Int64(offset))
                }
            }
        }
        return moves
    }

    /// The statements that note those moves in their sources' rows (`PostgresSchema.markLeft`).
    private func leftMarks(_ moves: [String: (name: String, seq: Int64)]) -> [(sql: String, parameters: [PGParameter])]
    {
        moves.keys.sorted().compactMap { source in
            moves[source].map { mark in
                (sql: PostgresSchema.markLeft, parameters: [.text(source), .text(mark.name), .int64(mark.seq)])
            }
        }
    }

    /// The moves a batch's view records make: from each view's source as applied here to the collection the
    /// record is stored under, its new source, where the two differ.
    private func viewMoves(_ records: [(view: String, collection: String)]) -> [(from: String, to: String)] {
        records.compactMap { record in
            guard let source = viewSource(record.view), source != record.collection else { return nil }
            return (source, record.collection)
        }
    }

    /// Hands on this server's committed batches in commit order. A batch that moves a view away from `sources` (or
    /// whose views' latest records are there, not applied yet) waits until the follower has read them
    /// (`readLeftSources`), at most `movePatience`, and the batches committed
    /// after it that touch those sources or its collections wait behind it: a write to the old source committed
    /// after the move must not take effect before it (`releaseReadBatches`). The follower reading one of these
    /// batches' rows does not hand it on (`SequencedDelivery.offer`).
    private func handOn(_ ranges: [Range], leaving sources: Set<String>, hold: Hold) {
        let id = queue.withLock { queue in
            queue.lastBatchID += 1
            queue.committed.append(
                CommittedBatch(
                    id: queue.lastBatchID, ranges: ranges, sources: sources, isRead: sources.isEmpty, hold: hold))
            return queue.lastBatchID
        }
        if !sources.isEmpty {
            wakeFollower()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Self.movePatience)) { [self] in
                guard markRead([id]) else { return }
                // Not read by now (a follower that cannot read): what it follows may never be handed on here, and
                // what it holds back goes without.
                for token in hold.tokens { delivery.release(token) }
                metrics.moveHandedOnUnread()
                logger.warning(
                    "a batch waited \(Self.movePatience) ms for the follower to read "
                        + "\(sources.sorted()); handed on without it")
                releaseReadBatches()
            }
        }
        releaseReadBatches()
    }

    /// Marks the batches of `ids` read; whether one of them was still waiting.
    private func markRead(_ ids: Set<Int>) -> Bool {
        queue.withLock { queue in
            var marked = false
            for index in queue.committed.indices where ids.contains(queue.committed[index].id) {
                marked = marked || !queue.committed[index].isRead
                queue.committed[index].isRead = true
            }
            return marked
        }
    }

    /// Hands on the read batches, in commit order, but for those that touch a collection of a batch before them
    /// still waiting (one of its ranges, or a source it leaves): a move holds up the writes to the source it
    /// leaves, not every write. One thread at a time, so that two threads never hand on two batches out of order.
    private func releaseReadBatches() {
        releasing.withLock { _ in
            let ready = queue.withLock { queue in
                var held: Set<String> = []
                var waiting: [CommittedBatch] = []
                var ready: [CommittedBatch] = []
                for batch in queue.committed {
                    if batch.isRead && batch.ranges.allSatisfy({ !held.contains($0.name) }) {
                        ready.append(batch)
                    } else {
                        held.formUnion(batch.sources)
                        held.formUnion(batch.ranges.map(\.name))
                        waiting.append(batch)
                    }
                }
                queue.committed = waiting
                return ready
            }
            var behind: [String] = []
            for batch in ready {
                // What the batch held back of the sources it leaves goes behind it, once it is handed on itself.
                if let barrier = batch.hold.barrier { delivery.release(barrier, after: batch.hold.after) }
                for range in batch.ranges where delivery.committed(range.name, first: range.first, count: range.count) {
                    behind.append(range.name)
                }
            }
            if !behind.isEmpty {
                // Records of other servers come before them that are not here yet: the follower reads them now.
                queue.withLock { $0.toFollow.formUnion(behind) }
                wakeFollower()
            }
        }
    }

    /// Hands on every batch still waiting, without a read and without what it follows: at a stop.
    private func releaseWaiting() {
        let waiting = queue.withLock { $0.committed }
        _ = markRead(Set(waiting.map(\.id)))
        releaseReadBatches()
        for token in waiting.flatMap(\.hold.tokens) { delivery.release(token) }
    }

    /// The statements that note, for each view record of the batch, that it is its view's latest (in the order of
    /// the views' names, whose rows `PostgresSchema.lockView` took in that order).
    private func viewNotes(_ byCollection: [String: [SequencedDelivery.Local]], _ assigned: [Range])
        -> [(sql: String, parameters: [PGParameter])]
    {
        var notes: [(view: String, parameters: [PGParameter])] = []
        for range in assigned {
            for (offset, record) in (byCollection[range.name] ?? []).enumerated() {
                guard let change = RecordCodec.viewChange(record.record) else { continue }
                let parameters: [PGParameter] = [
                    .text(change.view), .text(range.name), .int64(range.first + Int64(offset)),
                    .int64(change.note.rawValue),
                ]
                notes.append((change.view, parameters))
            }
        }
        return notes.sorted { $0.view < $1.view }.map { (sql: PostgresSchema.noteView, parameters: $0.parameters) }
    }

    /// The notification: this server's origin, then `key:lastSeq` for each collection or view (keys never hold
    /// spaces); `*` instead when that would not fit in a payload (under 8000 bytes), which makes readers compare
    /// every collection.
    private func payload(_ assigned: [Range]) -> String {
        let entries = assigned.map { "\($0.name):\($0.first + Int64($0.count) - 1)" }
        let text = ([origin] + entries).joined(separator: " ")
        return text.utf8.count < 7000 ? text : origin + " *"
    }

    // MARK: Snapshots

    /// Records that stay in the table behind a snapshot, for servers that have not read them yet.
    static let keptRecords: Int64 = 1000

    /// Counts the committed batch's bytes per collection; a collection that grew by `snapshotBytes` since its last
    /// snapshot, or was deleted, is snapshotted, with the views it feeds, at its latest sequence. (Keys
    /// `view:<name>`, which databases written before views were sequenced with their source still hold, are not
    /// snapshotted.)
    ///
    /// So is the new source of a view the batch moves (`movedTo`), right behind the move: the move's record changes
    /// the view as its old source left it, and a snapshot of the old source written after the move (which no longer
    /// holds the view, or, from a server that had not read the move yet, holds it stale) covers the records a start
    /// would have rebuilt that from. The new source's snapshot holds the view as the move left it, and a start leaves
    /// the view out of other collections' snapshots that stand after the record that brought it there
    /// (`PostgresRecovery`).
    ///
    /// Called before the batch's records are handed on (`assigned`: their sequences): the copy is queued on the
    /// collection's lane right behind its last record of the batch, so that it holds exactly the state after that
    /// record, and no record handed on later (such as a view moving to another source) shows in it.
    private func snapshotIfGrown(
        _ batch: [(collection: String, local: SequencedDelivery.Local)], _ assigned: [Range],
        movedTo: Set<String>, _ bytesSince: inout [String: Int]
    ) {
        for record in batch {
            bytesSince[record.collection, default: 0] += record.local.record.count
            if RecordCodec.deletesCollection(record.local.record) {
                _ = owedSnapshots.withLock { $0.insert(record.collection) }
            }
        }
        let owed = owedSnapshots.withLock { owed in
            owed.formUnion(movedTo)
            return owed
        }
        let grown = bytesSince.filter { $0.value >= snapshotBytes }.map(\.key)
        for name in Set(grown).union(owed) where !name.hasPrefix(LaneRouter.lane(ofView: "")) {
            guard snapshotting.withLock({ $0.insert(name).inserted }) else { continue }
            _ = owedSnapshots.withLock { $0.remove(name) }
            bytesSince[name] = 0
            let isOwed = owed.contains(name)
            let snapshot: @Sendable (Int64) -> Void = { [self] seq in
                copier.withLock { $0 }?(name) { [self] copy in writeSnapshot(name, seq, copy, owed: isOwed) }
            }
            if let seq = assigned.first(where: { $0.name == name }).map({ $0.first + Int64($0.count) - 1 }) {
                delivery.afterHandingOn(name, seq) { snapshot(seq) }
            } else {
                delivery.afterHandingOnLastCommitted(name, snapshot)
            }
        }
    }

    /// Stores the snapshot of `name` at `seq` (a `SnapshotFile` of the collection and its views) and deletes the
    /// records it covers, but the last `keptRecords`; those too after `purgeDelay` when the collection is gone. Runs
    /// on the housekeeper, behind the snapshots and purges queued before it. A snapshot `owed` (`owedSnapshots`)
    /// that fails is owed again.
    private func writeSnapshot(_ name: String, _ seq: Int64, _ copy: Copy, owed: Bool) {
        housekeeper.run { [self] connection throws(StorageError) in
            let started = MonotonicClock.now()
            let bytes = SnapshotFile.encode(
                nextSegment: 0, collections: copy.content.map { [(name, $0)] } ?? [], views: copy.views)
            try connection.execute("BEGIN")
            try connection.execute(PostgresSchema.saveSnapshot, [.text(name), .int64(seq), .bytes(bytes)])
            try connection.execute(PostgresSchema.compact, [.text(name), .int64(seq - Self.keptRecords)])
            try connection.execute("COMMIT")
            metrics.snapshotStored()
            _ = snapshotting.withLock { $0.remove(name) }
            logger.info(
                "snapshot of \(name) at record \(seq) (\(bytes.count) bytes, \(copy.views.count) views) written in "
                    + "\(MonotonicClock.now() - started) ms; records up to \(seq - Self.keptRecords) deleted")
            if copy.content == nil { purgeLater([name: seq]) }
            trySnapshotsOwedLater()
        } failed: { [self] error in
            // A grown collection is tried again as it grows on; one owed a snapshot, which may never be written
            // again, a second later.
            if owed || copy.content == nil { _ = owedSnapshots.withLock { $0.insert(name) } }
            metrics.snapshotFailed()
            _ = snapshotting.withLock { $0.remove(name) }
            logger.error("snapshot of \(name) failed (\(error)); its records are kept and it will be tried again")
            trySnapshotsOwedLater()
        }
    }

    /// Has the writer try the snapshots still owed a second from now (one that failed, or one left out while its
    /// collection was being snapshotted already), even if no batch comes: a view's move must not wait for the next
    /// write for the snapshot of its new source.
    private func trySnapshotsOwedLater() {
        guard !owedSnapshots.withLock({ $0.isEmpty }) else { return }
        let timed = queue.withLock { queue in
            defer { queue.owedSnapshotsTimed = true }
            return queue.owedSnapshotsTimed
        }
        guard !timed else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(1)) { [self] in
            queue.withLock { queue in
                queue.owedSnapshotsDue = true
                queue.owedSnapshotsTimed = false
            }
            writerWake.signal()
        }
    }

    /// Snapshots the collection (as not there, unless a later record created it) so that its records are purged
    /// after `purgeDelay`, as a deleted collection's are: a write through this server to a collection it had not
    /// applied is journaled (`App.expectWritable`), and one to a name that was never created would otherwise leave
    /// its rows for good.
    func noteMissingCollection(_ name: String) {
        _ = owedSnapshots.withLock { $0.insert(name) }
        trySnapshotsOwedLater()
    }

    /// Deletes, after `purgeDelay`, the records of each deleted collection up to the given sequence, where a stored
    /// snapshot covers them (a collection of that name written since keeps its later records).
    func purgeLater(_ deleted: [String: Int64]) {
        guard !deleted.isEmpty else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(purgeDelay))) { [self] in
            housekeeper.run { [self] connection throws(StorageError) in
                for (name, seq) in deleted.sorted(by: { $0.key < $1.key }) {
                    try connection.execute(PostgresSchema.purge, [.text(name), .int64(seq)])
                    logger.info("records of the deleted collection \(name) up to \(seq) purged")
                }
            } failed: { [self] error in
                logger.warning(
                    "purging the records of deleted collections failed (\(error)); the next start tries again")
            }
        }
    }

    // MARK: Following

    private func wakeFollower() {
        var byte: UInt8 = 1
        _ = write(followerWake.write, &byte, 1)
    }

    private func followLoop() {
        var connection: PGConnection?
        /// Whether the follower had a connection and lost it: the next one made counts as a reconnection.
        var lost = false
        /// Whether the writer was told to check its connection since the loss (once is enough).
        var toldWriter = false
        var backoff = Backoff()
        var lastCatchUp: Int64 = 0
        /// Whether a read stopped before a view's record that waits for a record held here (`Followed.blocked`):
        /// every collection is read again in a moment, 2 ms after the first such read, then twice as long after
        /// each next one, up to 64 ms (a catch-up reads every collection's `last_seq`).
        var readSoon = false
        var blockedWait: Int64 = 2
        while !queue.withLock({ $0.isClosing }) {
            guard let current = connection else {
                do throws(StorageError) {
                    let fresh = try PGConnection(url, role: "follower")
                    watchRoundTrips(of: fresh)
                    try fresh.execute("LISTEN " + PostgresSchema.channel)
                    readSoon = try catchUp(fresh)
                    if queue.withLock({ _ in metrics.setFollowerStalled(false) }) {
                        logger.log(.notice, "the PostgreSQL follower reads again: mutations are accepted")
                    }
                    connection = fresh
                    if lost { metrics.reconnected() }
                    lost = false
                    toldWriter = false
                    lastCatchUp = MonotonicClock.now()
                    backoff.reset()
                } catch {
                    logger.log(.debug, "the PostgreSQL follower cannot connect: \(error)")
                    // The writer, told of the loss, may have connected again in the moment before the database
                    // went: idle, it would not notice, and the store would read "up" throughout the outage. Told
                    // once more (not at every try: a writer whose connection works would lose it each time).
                    if lost && !toldWriter {
                        toldWriter = true
                        queue.withLock { $0.writerConnectionSuspect = true }
                        writerWake.signal()
                    }
                    waitForFollowerWake(milliseconds: backoff.next())
                }
                continue
            }
            do throws(StorageError) {
                var names = queue.withLock { queue in
                    defer { queue.toFollow = [] }
                    return queue.toFollow
                }
                var blocked = try readLeftSources(current)
                var everything = readSoon || MonotonicClock.now() - lastCatchUp >= catchUpInterval
                for notification in try current.notifications() {
                    let words = notification.payload.split(separator: " ")
                    guard let from = words.first, from != origin else { continue }
                    for word in words.dropFirst() {
                        guard word != "*" else {
                            everything = true
                            continue
                        }
                        guard let colon = word.lastIndex(of: ":"), let seq = Int64(word[word.index(after: colon)...])
                        else { continue }
                        let name = String(word[..<colon])
                        if seq > delivery.applied(name) { names.insert(name) }
                    }
                }
                if everything {
                    blocked = try catchUp(current) || blocked
                    lastCatchUp = MonotonicClock.now()
                } else if names.isEmpty {
                    if !blocked { waitForFollower(socket: current.socket, until: lastCatchUp + catchUpInterval) }
                } else {
                    let wanted = Dictionary(uniqueKeysWithValues: names.map { ($0, Int64?.none) })
                    let followed = try follow(wanted, current, everyName: false)
                    if followed != .read { lastCatchUp = MonotonicClock.now() }
                    blocked = blocked || followed == .blocked
                }
                readSoon = blocked
                // The record waited for is released by the writer within moments (or by the read just made).
                if blocked {
                    waitForFollower(socket: current.socket, until: MonotonicClock.now() + blockedWait)
                    blockedWait = min(blockedWait * 2, 64)
                } else {
                    blockedWait = 2
                }
            } catch {
                logger.warning("the PostgreSQL follower lost its connection (\(error)); reconnecting")
                connection = nil
                lost = true
                queue.withLock { $0.writerConnectionSuspect = true }
                writerWake.signal()
            }
        }
        // Stopping: what still waits for a catch-up is committed, and is answered so.
        releaseWaiting()
    }

    /// Reads the records of the sources that this server's committed view moves leave (and of the collections
    /// holding their views' latest records, not applied here yet), then hands those batches on (with those behind
    /// them). A view's record is stored under its new source, so that collection's order alone
    /// does not put it after the records of its old source that another server committed before it and whose
    /// notification is not in hand yet: applied at once, a view moved away from `zeta` missed a write to `zeta`
    /// that came first, and stayed a version behind the servers started afterwards
    /// (`LivePostgresTests.aViewMovedByThisServerAfterAnotherServersWriteToItsSourceFollowsThatWrite`). The read
    /// hands those records on in id order, this server's own rows with them when it meets them.
    ///
    /// Returns whether the read stopped before a view's record (`Followed.blocked`). The batches are handed on all
    /// the same: what they wait for comes before their own records in the database's order, so before that view
    /// record, and was handed on; and the record held may be one of theirs.
    private func readLeftSources(_ connection: PGConnection) throws(StorageError) -> Bool {
        let waiting = queue.withLock { $0.committed.filter { !$0.isRead } }
        guard !waiting.isEmpty else { return false }
        let sources = waiting.reduce(into: Set<String>()) { $0.formUnion($1.sources) }
        let followed = try follow(
            Dictionary(uniqueKeysWithValues: sources.map { ($0, nil) }), connection, everyName: false)
        _ = markRead(Set(waiting.map(\.id)))
        releaseReadBatches()
        return followed == .blocked
    }

    /// Reads every collection's last sequence and the records this server has not applied, all in one snapshot
    /// (a read-only transaction): a record that committed before a view's move (`PostgresSchema.lockCollection`)
    /// is then read with it, whichever collections the last sequences showed behind.
    ///
    /// Returns whether it stopped before a view's record (`Followed.blocked`).
    @discardableResult
    private func catchUp(_ connection: PGConnection) throws(StorageError) -> Bool {
        // It holds no lock, so it may sit idle longer than a commit (handing on a page of large records).
        let opened = connection.pipeline([
            (sql: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", parameters: []),
            (sql: "SET LOCAL idle_in_transaction_session_timeout = '60s'", parameters: []),
        ])
        do throws(StorageError) {
            for outcome in opened { _ = try outcome.get() }
            let result = try connection.execute(PostgresSchema.lastSequences)
            metrics.caughtUp()
            var behind: [String: Int64?] = [:]
            for row in 0..<result.rows {
                let name = result.string(row, 0)
                let last = result.int64(row, 1)
                if last > delivery.applied(name) { behind[name] = last }
            }
            var blocked = false
            if !behind.isEmpty { blocked = try follow(behind, connection, everyName: true) == .blocked }
            try connection.execute("COMMIT")
            return blocked
        } catch {
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
    }

    /// What `follow` did.
    private enum Followed {
        /// It read and handed on the records.
        case read
        /// It caught up every collection instead (`catchUp`).
        case caughtUp
        /// It stopped before a view's record that must wait for a record held here (`SequencedDelivery.holdsBefore`):
        /// the follower reads again in a moment.
        case blocked
    }

    /// Reads and hands on the records of the collections `wanted` after the last one applied of each, those of
    /// all of them in id order: a view's records, stored under each of its sources in turn, so take effect in the
    /// order they were committed. A collection's value, when known, is its last sequence: none left after the
    /// last one applied means they were purged.
    ///
    /// `everyName`: whether `wanted` holds every collection with records not applied (a catch-up, in one
    /// snapshot), rather than those some notifications named. In the second case a view's record may have been
    /// committed after records of its other source that no notification in hand names yet (a redefinition under
    /// `alpha` read before the definition under `zeta`: the view ended on the wrong source, found in
    /// `LivePostgresTests`); so a page that holds a view's record is left, and every collection is caught up
    /// instead (a read of every collection's `last_seq`, for each such page: view records are rare). So is a page
    /// of a collection that a view moved away from in a record not handed on here yet (`PostgresSchema.markLeft`,
    /// read after the page): the records of that collection committed after the move must take effect after it,
    /// which is stored under another collection.
    private func follow(_ wanted: [String: Int64?], _ connection: PGConnection, everyName: Bool)
        throws(StorageError) -> Followed
    {
        let page: Int64 = 1000
        let names = wanted.keys.sorted()
        let encodedNames = PGParameter.byteArrays(names.map { Array($0.utf8) })
        while true {
            let after = names.map { delivery.readThrough($0) }
            let records: (sql: String, parameters: [PGParameter]) = (
                sql: PostgresSchema.recordsOfAfter,
                parameters: [encodedNames, .int64s(after), .int64(page), .int64(Int64(pageBytes))]
            )
            let results = connection.pipeline(
                [records] + (everyName ? [] : [(sql: PostgresSchema.collectionsLeft, parameters: [encodedNames])]))
            let result = try results[0].get()
            // Copied out of the result once, for the check and for the hand-over.
            let rows = (0..<result.rows).map {
                (
                    name: result.string($0, 0), seq: result.int64($0, 1), record: result.bytes($0, 2),
                    id: result.int64($0, 3)
                )
            }
            if !everyName {
                let left = try results[1].get()
                let unread = (0..<left.rows).contains {
                    left.int64($0, 1) > delivery.applied(left.string($0, 0))
                }
                if unread || rows.contains(where: { RecordCodec.isViewRecord($0.record) }) {
                    return try catchUp(connection) ? .blocked : .caughtUp
                }
            }
            var read: Set<String> = []
            var readAgain = false
            let afterByName = Dictionary(uniqueKeysWithValues: zip(names, after))
            var start = 0
            // Each run of rows of one collection goes on at once, before the rows of others that follow it.
            while start < rows.count {
                let name = rows[start].name
                var end = start + 1
                while end < rows.count && rows[end].name == name { end += 1 }
                // A view's record waits for every record before it in the database's order: one held here (this
                // server's own, committed, that the writer has not released yet) would take effect after it. And
                // every record waits for a view's record before it that is held here (read by an earlier page).
                if let view = rows[start..<end].first(where: { RecordCodec.isViewRecord($0.record) }),
                    delivery.holdsBefore(view.id)
                {
                    return .blocked
                }
                if delivery.holdsViewRecordBefore(rows[start].id) { return .blocked }
                let (failed, gap) = delivery.offer(
                    name, rows[start..<end].map { (seq: $0.seq, record: $0.record, id: Optional($0.id)) })
                for record in failed { record.done(false) }
                // A gap behind where the read began: a record held here was dropped meanwhile (its transaction
                // rolled back), and its sequence is read again; past it, the records were compacted away.
                if gap && delivery.readThrough(name) < afterByName[name] ?? 0 {
                    readAgain = true
                } else if gap {
                    tellFallenBehind(name)
                    return .read
                }
                // A view's record held here itself (behind this server's own record, not released yet) holds up
                // the records after it in the database's order, of every collection.
                if rows[start..<end].contains(where: {
                    RecordCodec.isViewRecord($0.record) && $0.seq > delivery.applied(name)
                }) {
                    return .blocked
                }
                read.insert(name)
                start = end
            }
            if readAgain || Int64(rows.count) == page || rows.reduce(0, { $0 + $1.record.count }) >= pageBytes {
                continue
            }
            for (name, before) in zip(names, after) where !read.contains(name) {
                if let last = wanted[name] ?? nil, last > before, delivery.readThrough(name) == before {
                    tellFallenBehind(name)
                    return .read
                }
            }
            return .read
        }
    }

    /// The records of `name` after the last one applied are gone (compacted into a snapshot, or purged): told
    /// once, since the catch-ups that come while the server stops meet the same gap.
    private func tellFallenBehind(_ name: String) {
        guard
            let tell = fallenBehind.withLock({ tell in
                defer { tell = nil }
                return tell
            })
        else { return }
        logger.log(
            .critical,
            "collection \(name): records after \(delivery.applied(name)) were compacted into a snapshot "
                + "before this server read them; it cannot go on with it from here")
        tell(name)
    }

    private func waitForFollowerWake(milliseconds: Int) {
        var descriptors = [pollfd(fd: followerWake.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&descriptors, 1, Int32(milliseconds))
        drainFollowerWake()
    }

    private func waitForFollower(socket: Int32, until deadline: Int64) {
        var descriptors = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: followerWake.read, events: Int16(POLLIN), revents: 0),
        ]
        _ = poll(&descriptors, 2, Int32(max(0, min(deadline - MonotonicClock.now(), 1000))))
        drainFollowerWake()
    }

    private func drainFollowerWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(followerWake.read, &buffer, buffer.count) > 0 {}
    }
}
