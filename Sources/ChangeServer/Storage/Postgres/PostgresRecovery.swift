import Glibc
import Model

/// Starts a server from PostgreSQL: sets up the schema if needed, loads each collection's latest snapshot, then
/// replays the records after it, in sequence order per collection. Records of different collections are
/// independent, so their order across collections does not matter.
enum PostgresRecovery {
    /// How long a starting server waits for the database to answer before giving up.
    static let connectPatience: Int64 = 30_000

    /// Returns the last sequence applied per collection (where the follower goes on).
    static func run(url: String, executor: Executor, logger: Logger) throws(StartupError) -> [String: Int64] {
        let started = MonotonicClock.now()
        let connection = try connect(url, logger: logger)
        try PostgresSchema.prepare(connection)
        var applied: [String: Int64] = [:]
        var fromSnapshots = 0
        var records = 0
        do {
            // One snapshot of the database for every read: a snapshot and compaction another server writes while
            // this one reads would otherwise remove records between the snapshot it loaded and the ones it
            // replays. Replaying a page may take longer than the idle limit of other transactions.
            try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try connection.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            let snapshots = try connection.execute(PostgresSchema.snapshots)
            for row in 0..<snapshots.rows {
                let name = snapshots.string(row, 0)
                applied[name] = snapshots.int64(row, 1)
                guard !snapshots.isNull(row, 2) else { continue }
                let snapshot = try decodeSnapshot(snapshots.bytes(row, 2), of: name, limits: executor.limits)
                try Recovery.restore(snapshot, into: executor)
                fromSnapshots += 1
            }
            var key = (collection: "", seq: Int64(0))
            let page: Int64 = 10_000
            while true {
                let result = try connection.execute(
                    PostgresSchema.recordsToReplay, [.text(key.collection), .int64(key.seq), .int64(page)])
                for row in 0..<result.rows {
                    key = (result.string(row, 0), result.int64(row, 1))
                    guard key.seq == (applied[key.collection] ?? 0) + 1 else {
                        throw StartupError(
                            "collection \(key.collection) in PostgreSQL lacks records \((applied[key.collection] ?? 0) + 1) "
                                + "to \(key.seq - 1); refusing to start on wrong data")
                    }
                    let record: JournalRecord
                    do throws(BinaryReader.Malformed) {
                        record = try RecordCodec.decode(result.bytes(row, 2))
                    } catch {
                        throw StartupError("record \(key.seq) of collection \(key.collection) is unreadable")
                    }
                    executor.replay(record)
                    applied[key.collection] = key.seq
                    records += 1
                }
                if Int64(result.rows) < page { break }
            }
            try connection.execute("COMMIT")
        } catch let error as StartupError {
            throw error
        } catch {
            throw StartupError("cannot read the journal from PostgreSQL: \(error)")
        }
        logger.info(
            "recovered \(executor.registry.count) collections from PostgreSQL: \(fromSnapshots) from snapshots, "
                + "\(records) records replayed in \(MonotonicClock.now() - started) ms")
        return applied
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

    /// Connects, trying again with backoff for up to `connectPatience` (the database may be starting too).
    private static func connect(_ url: String, logger: Logger) throws(StartupError) -> PGConnection {
        let deadline = MonotonicClock.now() + connectPatience
        var backoff = Backoff()
        while true {
            do throws(StorageError) {
                return try PGConnection(url)
            } catch {
                guard MonotonicClock.now() < deadline else {
                    throw StartupError("cannot connect to PostgreSQL: \(error)")
                }
                logger.warning("cannot connect to PostgreSQL yet (\(error)); trying again")
                usleep(UInt32(backoff.next() * 1000))
            }
        }
    }
}
