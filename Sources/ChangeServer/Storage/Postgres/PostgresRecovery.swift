import Glibc
import Model

/// Starts a server from PostgreSQL: sets up the schema if needed, then replays the records that no snapshot covers
/// and restores each collection's latest snapshot, all in the order of the records' ids (a snapshot stands where
/// its last record does). Records of different collections are mostly independent, but not a view's records, which
/// are stored under each source it had in turn: replayed in id order they take effect in the order they were
/// committed, and a view held by the snapshots of several of its sources ends as the latest one holds it.
enum PostgresRecovery {
    /// How long a starting server waits for the database to answer before giving up.
    static let connectPatience: Int64 = 30_000

    /// Where the follower goes on, and what is left to purge.
    struct Outcome {
        /// The last sequence applied per collection.
        var applied: [String: Int64]
        /// Collections deleted by their last record whose records are still in the database (a server stopped
        /// before it purged them), each with the sequence of that record, where a snapshot now stands: purged by
        /// the journal later.
        var deleted: [String: Int64]
        /// Per source, the items its replayed view definitions were evaluated on (each reads its whole source): a
        /// snapshot of the source spares the next start that work (`PostgresJournal.snapshotAfterStart`).
        var definitionItems: [String: Int] = [:]
        /// The sources of views that a replayed record moved from another source: no snapshot of theirs stands
        /// after that record, which the server that committed it owed them (`PostgresJournal.snapshotAfterStart`).
        var movedTo: Set<String> = []
    }

    /// Recovers into an executor of its own, made by `makeExecutor`, and tries again with a new one when the
    /// database's connection breaks on the way (a restart or failover of the database while the server starts), as
    /// when it cannot be reached at all: each break gives the next try `connectPatience` of its own (a long replay
    /// would leave a break late in it no time at all), up to `restartLimit` breaks.
    static func recover(
        url: String, logger: Logger, makeExecutor: () -> Executor
    ) throws(StartupError) -> (executor: Executor, outcome: Outcome) {
        let tries = Tries(logger: logger)
        var breaks = 0
        var deadline = MonotonicClock.now() + connectPatience
        while true {
            let executor = makeExecutor()
            do throws(StartupError) {
                return (
                    executor, try run(url: url, executor: executor, logger: logger, deadline: deadline, tries: tries)
                )
            } catch {
                breaks += 1
                guard error.mayPass, breaks <= restartLimit else { throw error }
                tries.failed("the start lost its PostgreSQL connection (\(error))")
                deadline = MonotonicClock.now() + connectPatience
            }
        }
    }

    /// How many times a start begins again after its connection broke, before it gives up: a query that ends its
    /// own backend every time would otherwise restart the database for as long as the start went on.
    static let restartLimit = 5

    /// The tries of a start that waits for its database, over every connection it makes: the first failure, and each
    /// that gives another reason, logged at `warning`, the others at `debug` (a database down for 30 s wrote 27
    /// lines the same).
    final class Tries {
        let logger: Logger
        private var backoff = Backoff()
        private var lastReason: String?

        init(logger: Logger) { self.logger = logger }

        /// Logs the failure and waits before the next try.
        func failed(_ message: String) {
            logger.log(message == lastReason ? .debug : .warning, "\(message); trying again")
            lastReason = message
            usleep(UInt32(backoff.next() * 1000))
        }
    }

    /// `pageBytes`: record bytes a page of records read holds at most, but for its first record. `deadline`: until
    /// when a database that cannot be reached is tried again; `tries`: the start's, when it is one of several.
    static func run(
        url: String, executor: Executor, logger: Logger, pageBytes: Int = PostgresSchema.pageBytes,
        deadline: Int64 = MonotonicClock.now() + connectPatience, tries: Tries? = nil
    ) throws(StartupError) -> Outcome {
        let connection = try connect(url, deadline: deadline, tries: tries ?? Tries(logger: logger))
        // The wait for the database is not the replay's time.
        let started = MonotonicClock.now()
        do throws(StartupError) {
            if let earlier = try PostgresSchema.prepare(connection) {
                logger.warning(
                    "the database's schema went from version \(earlier) to \(PostgresSchema.version) (records are "
                        + "ordered by an id, since 2026-12-03): servers of earlier builds refuse it from now on")
            }
        } catch {
            throw StartupError(error.description, mayPass: connection.isBroken)
        }
        var applied: [String: Int64] = [:]
        var fromSnapshots = 0
        var records = 0
        var replayed: Set<String> = []
        var definitionItems: [String: Int] = [:]
        var movedViews: Set<String> = []
        // The views each absent collection fed right after its last record was replayed: what a snapshot at that
        // record holds (a view may have moved to another source since, by a record of another collection).
        var viewsAtLastRecord: [String: [SnapshotFile.SavedView]] = [:]
        // Per view, the id of the last record or snapshot replayed that held or changed it.
        var viewTouched: [String: Int64] = [:]
        var leftover: [String] = []
        do {
            // One snapshot of the database for every read: a snapshot and compaction another server writes while
            // this one reads would otherwise remove records between the snapshot it loaded and the ones it
            // replays. Replaying a page may take longer than the idle limit of other transactions.
            try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try connection.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            let snapshots = try connection.execute(PostgresSchema.snapshots)
            for row in 0..<snapshots.rows { applied[snapshots.string(row, 0)] = snapshots.int64(row, 1) }
            let sources = try connection.execute(PostgresSchema.viewSources)
            let viewSources = Dictionary(
                (0..<sources.rows).map { (sources.string($0, 0), (sources.string($0, 1), sources.int64($0, 2))) },
                uniquingKeysWith: { $1 })
            var nextSnapshot = 0
            /// Restores the snapshots that stand before the record of id `id`. A snapshot of another collection than
            /// a view's noted source, standing after the record that brought the view there, holds that view stale
            /// (from a server that had not applied that record yet): the view is left out of it. (One that stands
            /// before it holds the view as that record found it.)
            func restoreSnapshots(before id: Int64) throws {
                while nextSnapshot < snapshots.rows && snapshots.int64(nextSnapshot, 3) < id {
                    defer { nextSnapshot += 1 }
                    guard !snapshots.isNull(nextSnapshot, 2) else { continue }
                    let bytes = snapshots.bytes(nextSnapshot, 2)
                    let name = snapshots.string(nextSnapshot, 0)
                    let position = snapshots.int64(nextSnapshot, 3)
                    var snapshot = try decodeSnapshot(bytes, of: name, limits: executor.limits)
                    snapshot.views.removeAll { view in
                        guard let (source, since) = viewSources[view.name] else { return false }
                        return source != name && position > since
                    }
                    for view in snapshot.views { viewTouched[view.name] = position }
                    try restore(snapshot, into: executor)
                    fromSnapshots += 1
                }
            }
            var lastID: Int64 = 0
            var key = (collection: "", seq: Int64(0))
            let page: Int64 = 10_000
            let pageBytes = max(1, pageBytes)
            while true {
                let result = try connection.execute(
                    PostgresSchema.recordsToReplay, [.int64(lastID), .int64(page), .int64(Int64(pageBytes))])
                var bytes = 0
                for row in 0..<result.rows {
                    key = (result.string(row, 0), result.int64(row, 1))
                    lastID = result.int64(row, 3)
                    try restoreSnapshots(before: lastID)
                    guard key.seq == (applied[key.collection] ?? 0) + 1 else {
                        throw StartupError(
                            "collection \(key.collection) in PostgreSQL lacks records \((applied[key.collection] ?? 0) + 1) "
                                + "to \(key.seq - 1); refusing to start on wrong data")
                    }
                    let record: JournalRecord
                    let encoded = result.bytes(row, 2)
                    bytes += encoded.count
                    do throws(BinaryReader.Malformed) {
                        record = try RecordCodec.decode(encoded)
                    } catch {
                        throw StartupError("record \(key.seq) of collection \(key.collection) is unreadable")
                    }
                    let sourceBefore = record.definedView.flatMap(executor.views.source(of:))
                    executor.replay(record)
                    switch record {
                    case .defineView(let view, _, _, _, _), .deleteView(let view, _): viewTouched[view] = lastID
                    case .put, .ops, .upsert, .delete: break
                    }
                    if let view = record.definedView,
                        let (source, items) = Recovery.read(byReplayed: record, in: executor)
                    {
                        definitionItems[source, default: 0] += items
                        if let sourceBefore, sourceBefore != source { movedViews.insert(view) }
                    }
                    if executor.registry.entry(key.collection) == nil {
                        viewsAtLastRecord[key.collection] = executor.views.saved(feedingFrom: key.collection)
                    }
                    applied[key.collection] = key.seq
                    replayed.insert(key.collection)
                    records += 1
                }
                if Int64(result.rows) < page && bytes < pageBytes { break }
            }
            try restoreSnapshots(before: .max)
            // A snapshot of a view's earlier source may hold a view deleted since under another source, whose
            // snapshot covers the deletion and does not hold it. A view held or changed by anything replayed after
            // its deletion stays (a server of an earlier version, which notes nothing, defined it again).
            let deletedViews = try connection.execute(PostgresSchema.deletedViews)
            for row in 0..<deletedViews.rows {
                let name = deletedViews.string(row, 0)
                guard let entry = executor.views.entry(name), viewTouched[name] ?? 0 <= deletedViews.int64(row, 1)
                else { continue }
                executor.views.remove(entry, source: entry.live.withLock { $0.definition.source })
            }
            let gone = applied.keys.filter { name in
                executor.registry.entry(name) == nil && !name.hasPrefix(LaneRouter.lane(ofView: ""))
            }
            let left = try connection.execute(
                PostgresSchema.namesWithRecords, [.byteArrays(gone.map { Array($0.utf8) })])
            leftover = (0..<left.rows).map { left.string($0, 0) }
            try connection.execute("COMMIT")
        } catch let error as StartupError {
            throw error
        } catch {
            throw StartupError("cannot read the journal from PostgreSQL: \(error)", mayPass: connection.isBroken)
        }
        logger.info(
            "recovered \(executor.registry.count) collections and \(executor.views.count) views from PostgreSQL: "
                + "\(fromSnapshots) from snapshots, "
                + "\(records) records replayed in \(MonotonicClock.now() - started) ms")
        let deleted = snapshotDeleted(
            leftover, replayed, applied, viewsAtLastRecord, executor: executor, connection, logger: logger)
        // A source gone by the end of the replay has nothing to snapshot: its deletion is snapshotted above, and no
        // later start replays its definitions.
        definitionItems = definitionItems.filter { executor.registry.entry($0.key) != nil }
        return Outcome(
            applied: applied, deleted: deleted, definitionItems: definitionItems,
            movedTo: Set(movedViews.compactMap(executor.views.source(of:))))
    }

    /// Restores a snapshot over what the records before it made: a view it holds replaces the one of that name (a
    /// view that moved here from a source whose snapshot or records came earlier).
    private static func restore(_ snapshot: SnapshotFile.Contents, into executor: Executor) throws(StartupError) {
        for view in snapshot.views {
            guard let existing = executor.views.entry(view.name) else { continue }
            executor.views.remove(existing, source: existing.live.withLock { $0.definition.source })
        }
        try Recovery.restore(snapshot, into: executor)
    }

    /// The deleted collections whose records may be purged, with the sequence of their last: a snapshot at it is
    /// stored first for those whose deletion was replayed (the others' snapshot is already there), holding the
    /// views the collection fed at that record. A snapshot that cannot be stored is logged, and its collection's
    /// records stay.
    private static func snapshotDeleted(
        _ names: [String], _ replayed: Set<String>, _ applied: [String: Int64],
        _ viewsAtLastRecord: [String: [SnapshotFile.SavedView]], executor: Executor, _ connection: PGConnection,
        logger: Logger
    ) -> [String: Int64] {
        var stored: [String: Int64] = [:]
        for name in names.sorted() {
            let seq = applied[name] ?? 0
            guard replayed.contains(name) else {
                stored[name] = seq
                continue
            }
            let bytes = SnapshotFile.encode(
                nextSegment: 0, collections: [],
                views: viewsAtLastRecord[name] ?? executor.views.saved(feedingFrom: name))
            do throws(StorageError) {
                try connection.execute(PostgresSchema.saveSnapshot, [.text(name), .int64(seq), .bytes(bytes)])
                stored[name] = seq
            } catch {
                logger.warning("cannot snapshot the deleted collection \(name) (\(error)); its records are kept")
            }
        }
        return stored
    }

    /// A snapshot row's content: a `SnapshotFile` of the collection and the views it feeds; or, as servers wrote
    /// before views were sequenced with their source, the collection's encoded form alone.
    static func decodeSnapshot(_ bytes: [UInt8], of name: String, limits: HistoryLimits) throws(StorageError)
        -> SnapshotFile.Contents
    {
        do throws(BinaryReader.Malformed) {
            if bytes.starts(with: SnapshotFile.magic) { return try SnapshotFile.decode(bytes, limits: limits) }
            var reader = BinaryReader(bytes)
            let content = try VersionedCollection(decoding: &reader, limits: limits)
            guard reader.isAtEnd else { throw BinaryReader.Malformed() }
            return SnapshotFile.Contents(nextSegment: 0, collections: [(name, content)], views: [])
        } catch {
            throw .unavailable(reason: "the snapshot of collection \(name) in PostgreSQL is corrupt")
        }
    }

    /// Connects, trying again with backoff until `deadline` (the database may be starting too).
    private static func connect(_ url: String, deadline: Int64, tries: Tries) throws(StartupError) -> PGConnection {
        while true {
            do throws(StorageError) {
                return try PGConnection(url, role: "recovery")
            } catch {
                guard MonotonicClock.now() < deadline, !PGConnection.refusesItsOptions(error) else {
                    throw StartupError("cannot connect to PostgreSQL: \(error)")
                }
                tries.failed("cannot connect to PostgreSQL yet (\(error))")
            }
        }
    }
}
