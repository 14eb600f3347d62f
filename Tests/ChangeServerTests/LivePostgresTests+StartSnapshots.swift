import Dispatch
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// What a start on PostgreSQL snapshots at once: the sources of many view definitions it replayed (their records,
/// a few hundred bytes each, would seldom make a source grow by `--snapshot-bytes`, and every start would replay
/// them all again, each reading its whole source), and the sources of views it found moved by a record with no
/// snapshot after it (a server that stopped before the snapshot the move owed).
extension LivePostgresTests {
    /// Recovery counts, per source, the items its replayed definitions read (a source grown between two
    /// definitions counts what each found; a view defined on a source deleted since is not counted) and notes where
    /// views moved; the journal snapshots those sources, with their views, keeping the records behind them (more
    /// than a compaction keeps); the next start restores them with nothing to replay, each view as it was, its
    /// version too. (`Snapshots.definitionsWorthASnapshot` items take a debug build about 15 s to replay: the
    /// threshold is passed here.)
    @Test func aStartThatReplayedManyDefinitionsSnapshotsTheirSources() throws {
        let cluster = try PostgresCluster()
        let database = "definitions"
        let url = try cluster.createDatabase(database)
        let views = ["v0", "v1", "v2", "m"]
        var bodies: [String: String] = [:]
        do {
            let server = try ServerProcess(["--postgres", url])
            let items = (0..<1000).map { ["id": "i\($0)", "data": ["owner": "o\($0 % 3)"]] }
            for (name, count) in [("c", 1000), ("d", 1000), ("e", 10)] {
                let content = ["sections": [["id": "s", "items": Array(items[..<count])]]]
                #expect(try server.client.put("/v1/collections/\(name)", content).status == 201)
            }
            for owner in 0..<2 {
                let definition: [String: Any] = ["source": "c", "filter": ["field": "/owner", "eq": "o\(owner)"]]
                #expect(try server.client.put("/v1/views/v\(owner)", definition).status == 201)
            }
            #expect(try server.client.put("/v1/collections/c/items/late", ["data": ["owner": "o2"]]).status == 201)
            let definition: [String: Any] = ["source": "c", "filter": ["field": "/owner", "eq": "o2"]]
            #expect(try server.client.put("/v1/views/v2", definition).status == 201)
            #expect(try server.client.put("/v1/views/m", ["source": "c"]).status == 201)
            #expect(try server.client.put("/v1/views/m", ["source": "e"]).status == 200)
            #expect(try server.client.put("/v1/views/gone", ["source": "d"]).status == 201)
            #expect(try server.client.request("DELETE", "/v1/collections/d").status == 204)
            // More records of c than a compaction keeps behind a snapshot (`PostgresJournal.keptRecords`).
            let refused = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { writer in
                for index in 0..<132 {
                    let status = try? server.client.put("/v1/collections/c/items/w\(writer)-\(index)", ["data": 1])
                        .status
                    if status != 201 { refused.add(1, ordering: .relaxed) }
                }
            }
            #expect(refused.load(ordering: .relaxed) == 0)
            for view in views { bodies[view] = try server.client.get("/v1/views/\(view)").text }
        }
        // As after a crash before the snapshots the server owed: the deleted d's, and the one the move owed e.
        _ = try cluster.sql("DELETE FROM changeserver_snapshots", database: database)
        let records = "SELECT count(*) FROM changeserver_records WHERE collection = 'c'"
        let recordsBefore = try cluster.sql(records, database: database)
        #expect(Int(recordsBefore.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 1050)
        let executor = Executor(registry: Registry(), views: ViewRegistry(), limits: HistoryLimits())
        let outcome = try PostgresRecovery.run(url: url, executor: executor, logger: Logger(level: .warning))
        #expect(outcome.definitionItems == ["c": 1000 + 1000 + 1001 + 1001, "e": 10])
        #expect(outcome.movedTo == ["e"])
        let journal = try PostgresJournal(
            url: url, applied: outcome.applied, snapshotBytes: 1 << 30, purgeDelay: 60_000,
            viewSource: { name in executor.views.source(of: name) },
            logger: Logger(level: .error))
        journal.start(
            applyingRemote: { _, _ in },
            copyOnLane: { name, take in
                take(
                    (
                        executor.registry.entry(name).map { entry in entry.content.withLock { $0 } },
                        executor.views.saved(feedingFrom: name)
                    ))
            },
            fellBehind: { _ in })
        journal.snapshotAfterStart(definitionItems: outcome.definitionItems, movedTo: outcome.movedTo, worth: 4012)
        let stored = "SELECT string_agg(collection, ',' ORDER BY collection) FROM changeserver_snapshots"
        #expect(try eventually { try cluster.sql(stored, database: database) == "c,d,e\n" })
        journal.close()
        #expect(try cluster.sql(records, database: database) == recordsBefore, "the start compacted nothing")
        let restored = try ServerProcess(["--postgres", url, "--log-level", "info"])
        #expect(restored.log.contains("3 from snapshots, 0 records replayed"), "\(restored.log)")
        for view in views { #expect(try restored.client.get("/v1/views/\(view)").text == bodies[view], "\(view)") }
    }
}
