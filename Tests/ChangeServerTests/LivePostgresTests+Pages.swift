import Dispatch
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// Pages of records read from PostgreSQL (by a starting server and by the follower) are bounded in bytes as well
/// as in count: a page is cut after the record that reaches the limit, so it always holds at least one record.
extension LivePostgresTests {
    /// The two reads, straight against the schema: records of 10,000 bytes, interleaved between two collections.
    @Test func pagesAreCutAfterTheRecordThatReachesTheByteLimit() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("pages")
        let connection = try PGConnection(url)
        try PostgresSchema.prepare(connection)
        func insert(_ collection: String, _ seqs: ClosedRange<Int>) throws {
            try cluster.sql(
                "INSERT INTO changeserver_records (collection, seq, record) SELECT '\(collection)', g, "
                    + "decode(repeat('ab', 10000), 'hex') FROM generate_series(\(seqs.lowerBound), \(seqs.upperBound)) g",
                database: "pages")
        }
        try insert("a", 1...3)
        try insert("b", 1...2)
        try insert("a", 4...6)
        try insert("b", 3...4)
        func replay(after id: Int64, limit: Int64, bytes: Int64) throws -> [String] {
            let result = try connection.execute(
                PostgresSchema.recordsToReplay, [.int64(id), .int64(limit), .int64(bytes)])
            return (0..<result.rows).map { "\(result.string($0, 0))\(result.int64($0, 1))" }
        }
        #expect(try replay(after: 0, limit: 1000, bytes: 25_000) == ["a1", "a2", "a3"])
        #expect(try replay(after: 0, limit: 1000, bytes: 30_000) == ["a1", "a2", "a3"])
        #expect(try replay(after: 0, limit: 1000, bytes: 30_001) == ["a1", "a2", "a3", "b1"])
        #expect(try replay(after: 0, limit: 1000, bytes: 1) == ["a1"], "a page holds one record at least")
        #expect(try replay(after: 3, limit: 2, bytes: 1 << 30) == ["b1", "b2"])
        #expect(try replay(after: 0, limit: 1000, bytes: 1 << 30).count == 10)
        func follow(_ after: [String: Int64], limit: Int64, bytes: Int64) throws -> [String] {
            let names = after.keys.sorted()
            let result = try connection.execute(
                PostgresSchema.recordsOfAfter,
                [
                    PGParameter.byteArrays(names.map { Array($0.utf8) }), .int64s(names.map { after[$0] ?? 0 }),
                    .int64(limit), .int64(bytes),
                ])
            return (0..<result.rows).map { "\(result.string($0, 0))\(result.int64($0, 1))" }
        }
        #expect(try follow(["a": 1, "b": 0], limit: 1000, bytes: 25_000) == ["a2", "a3", "b1"])
        #expect(try follow(["a": 5, "b": 1], limit: 1000, bytes: 1 << 30) == ["b2", "a6", "b3", "b4"])
        #expect(try follow(["a": 5, "b": 1], limit: 1000, bytes: 10_000) == ["b2"])
        #expect(try follow(["a": 0], limit: 2, bytes: 1 << 30) == ["a1", "a2"])
    }

    /// A starting server whose pages hold about two records replays every one of them (it stopped at the first
    /// page that was not full in count).
    @Test func aStartReadsEveryPageCutByBytes() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("startpages")
        let server = try ServerProcess(["--postgres", url])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        for step in 0..<20 {
            let data = String(repeating: "x", count: 10_000)
            #expect(try server.client.put("/v1/collections/c/items/i\(step)", ["data": data]).status == 201)
        }
        let running = try server.client.get("/v1/collections/c").object
        let executor = Executor(registry: Registry(), limits: HistoryLimits())
        let outcome = try PostgresRecovery.run(
            url: url, executor: executor, logger: Logger(level: .warning), pageBytes: 25_000)
        #expect(outcome.applied["c"] == 21)
        let content = executor.registry.entry("c")?.content.withLock { $0 }
        #expect(content?.itemCount == 20)
        #expect(content.map { "\($0.version)" } == running["version"] as? String)
    }

    /// The follower reads what a notification names in pages of about two records, and goes on until it has
    /// read them all (the catch-up every second is off here, so a follower that stopped at the first page short
    /// in count would have applied three records of ten).
    @Test func theFollowerReadsEveryPageCutByBytes() throws {
        let cluster = try PostgresCluster()
        let applied = Mutex<[String]>([])
        let (url, journal) = try startedJournal(
            on: cluster, database: "followpages", pageBytes: 25_000,
            applied: { record in
                if case .upsert(_, let id, _, _, _, _, _) = record { applied.withLock { $0.append(id) } }
            })
        defer { journal.close() }
        // The follower listens once it has connected: the records go in when its first catch-up has read nothing.
        #expect(try eventually { journal.metricsText().contains("changeserver_store_catch_ups_total 1") })
        let writer = try PGConnection(url)
        try writer.execute("BEGIN")
        try writer.execute("INSERT INTO changeserver_collections (name, last_seq) VALUES ('f', 10)")
        for seq in 1...10 {
            let data = JSONData(canonical: "\"" + String(repeating: "y", count: 10_000) + "\"")
            let record = RecordCodec.encode(
                .upsert(collection: "f", id: "i\(seq)", data: data, section: nil, index: nil, conditions: .none))
            try writer.execute(
                "INSERT INTO changeserver_records (collection, seq, record) VALUES ('f', $1, $2)",
                [.int64(Int64(seq)), .bytes(record)])
        }
        try writer.execute("COMMIT")
        try writer.execute(PostgresSchema.notify, [.text(PostgresSchema.channel), .text("another f:10")])
        #expect(try eventually { applied.withLock { $0.count } == 10 }, "\(applied.withLock { $0 })")
        #expect(applied.withLock { $0 } == (1...10).map { "i\($0)" })
    }

    /// A view's move off `zeta` waits for the follower's read of `zeta`, and this server's own writes to `zeta`
    /// committed with it or after it wait behind the move: the follower, reading pages of one record, reads past them
    /// (it read them again from the last record handed on, page after page, and the move was handed on only when
    /// its patience ran out, 2 s later).
    @Test func theFollowerReadsPastThisServersRecordsHeldBehindAMove() throws {
        let cluster = try PostgresCluster()
        let (_, journal) = try startedJournal(
            on: cluster, database: "heldpages", pageBytes: 1, viewSource: { $0 == "v" ? "zeta" : nil })
        defer { journal.close() }
        #expect(try eventually { journal.metricsText().contains("changeserver_store_catch_ups_total 1") })
        let answered = Mutex<[String]>([])
        func append(_ name: String, _ record: JournalRecord) throws {
            try journal.append(RecordCodec.encode(record)) { durable in
                answered.withLock { $0.append(durable ? name : "\(name) failed") }
            }
        }
        let move = JournalRecord.defineView(
            view: "v", epoch: "e", definition: JSONData(canonical: #"{"source":"alpha"}"#), conditions: .none)
        try append("move", move)
        for step in 0..<3 {
            let write = JournalRecord.upsert(
                collection: "zeta", id: "i\(step)", data: JSONData(canonical: "1"), section: nil, index: nil,
                conditions: .none)
            try append("write \(step)", write)
        }
        #expect(try eventually { answered.withLock { $0.count } == 4 })
        #expect(answered.withLock { $0 } == ["move", "write 0", "write 1", "write 2"])
        #expect(journal.metricsText().contains("changeserver_store_moves_unread_total 0"), "handed on unread")
    }
}

extension LivePostgresTests {
    /// A journal in this process on a new database `database` of `cluster` (its schema set up), started, with the
    /// follower's catch-up every second off (an hour) and no snapshot before 1 GiB: the records of other servers go
    /// to `applied`. Returns the database's URL too.
    func startedJournal(
        on cluster: PostgresCluster, database: String, pageBytes: Int = PostgresSchema.pageBytes,
        viewSource: @escaping @Sendable (String) -> String? = { _ in nil },
        applied: @escaping @Sendable (JournalRecord) -> Void = { _ in }
    ) throws -> (String, PostgresJournal) {
        let url = try cluster.createDatabase(database)
        try PostgresSchema.prepare(PGConnection(url))
        let journal = try PostgresJournal(
            url: url, applied: [:], snapshotBytes: 1 << 30, purgeDelay: 60_000, catchUpInterval: 3_600_000,
            pageBytes: pageBytes, viewSource: viewSource, logger: Logger(level: .error))
        journal.start(
            applyingRemote: { record, _ in applied(record) }, copyOnLane: { _, _ in }, fellBehind: { _ in })
        return (url, journal)
    }
}

/// The housekeeper's connection, against a real database.
extension LivePostgresTests {
    /// A job that fails inside a transaction leaves its connection behind (the next job would meet "current
    /// transaction is aborted"); a connection the database ended between two jobs (a restart) is replaced and the
    /// job runs on the new one instead of failing.
    @Test func theHousekeeperStartsAfreshAfterAFailedJobAndAnEndedConnection() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("housekeeper")
        let housekeeper = Housekeeper(url: url)
        defer { _ = housekeeper.close(until: MonotonicClock.now() + 5000) }
        let outcomes = Mutex<[String]>([])
        let backends = Mutex<[Int64]>([])
        let done = DispatchSemaphore(value: 0)
        func run(_ name: String, _ statements: [String], then: @escaping @Sendable () -> Void = {}) {
            housekeeper.run { connection throws(StorageError) in
                for statement in statements { try connection.execute(statement) }
                let pid = try connection.execute("SELECT pg_backend_pid()::bigint").int64(0, 0)
                backends.withLock { $0.append(pid) }
                outcomes.withLock { $0.append("\(name) ran") }
                then()
                done.signal()
            } failed: { _ in
                outcomes.withLock { $0.append("\(name) failed") }
                done.signal()
            }
        }
        run("before", [])
        run("dividing", ["BEGIN", "SELECT 1 / 0"])
        run("after", ["SELECT 1"])
        for _ in 0..<3 { #expect(done.wait(timeout: .now() + 20) == .success) }
        #expect(outcomes.withLock { $0 } == ["before ran", "dividing failed", "after ran"])
        // The next job waits until the first has handed its connection on, and the database ends it meanwhile.
        let ended = DispatchSemaphore(value: 0)
        run("first", []) { _ = ended.wait(timeout: .now() + 20) }
        run("second", ["SELECT 1"])
        let first = try #require(
            waitUntil(timeout: 20) { backends.withLock { $0.count } == 3 } ? backends.withLock { $0.last } : nil)
        try cluster.sql("SELECT pg_terminate_backend(\(first))", database: "housekeeper")
        ended.signal()
        for _ in 0..<2 { #expect(done.wait(timeout: .now() + 20) == .success) }
        #expect(outcomes.withLock { $0 } == ["before ran", "dividing failed", "after ran", "first ran", "second ran"])
        #expect(backends.withLock { $0.last } != first, "the second ran on a new connection")
    }
}
