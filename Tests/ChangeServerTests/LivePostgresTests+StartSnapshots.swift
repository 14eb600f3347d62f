import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// A start on PostgreSQL that replayed many view definitions snapshots their sources at once: their records are a
/// few hundred bytes each, so the sources would seldom grow by `--snapshot-bytes`, and every start would replay
/// them all again, each reading its whole source.
extension LivePostgresTests {
    /// Recovery counts, per source, the items its replayed definitions read (a source grown between two
    /// definitions counts what each found; a view defined on a source deleted since is not counted); the journal
    /// snapshots the source owed, with its views; and the next start restores them from that snapshot with
    /// nothing to replay, each view reading as it did. (`Snapshots.definitionsWorthASnapshot` items take a debug
    /// build about 15 s to replay: the threshold is passed here.)
    @Test func aStartThatReplayedManyDefinitionsSnapshotsTheirSources() throws {
        let cluster = try PostgresCluster()
        let database = "definitions"
        let url = try cluster.createDatabase(database)
        let snapshots = "SELECT seq FROM changeserver_snapshots WHERE collection = 'c'"
        var bodies: [String: String] = [:]
        do {
            let server = try ServerProcess(["--postgres", url])
            let items = (0..<1000).map { ["id": "i\($0)", "data": ["owner": "o\($0 % 3)"]] }
            for name in ["c", "d"] {
                let content = ["sections": [["id": "s", "items": items]]]
                #expect(try server.client.put("/v1/collections/\(name)", content).status == 201)
            }
            for owner in 0..<2 {
                let definition: [String: Any] = ["source": "c", "filter": ["field": "/owner", "eq": "o\(owner)"]]
                #expect(try server.client.put("/v1/views/v\(owner)", definition).status == 201)
            }
            #expect(try server.client.put("/v1/collections/c/items/late", ["data": ["owner": "o2"]]).status == 201)
            let definition: [String: Any] = ["source": "c", "filter": ["field": "/owner", "eq": "o2"]]
            #expect(try server.client.put("/v1/views/v2", definition).status == 201)
            #expect(try server.client.put("/v1/views/gone", ["source": "d"]).status == 201)
            #expect(try server.client.request("DELETE", "/v1/collections/d").status == 204)
            for view in 0..<3 { bodies["v\(view)"] = try server.client.get("/v1/views/v\(view)").text }
            #expect(try cluster.sql(snapshots, database: database) == "")
        }
        let executor = Executor(registry: Registry(), views: ViewRegistry(), limits: HistoryLimits())
        let outcome = try PostgresRecovery.run(url: url, executor: executor, logger: Logger(level: .warning))
        #expect(outcome.definitionItems == ["c": 1000 + 1000 + 1001])
        let journal = try PostgresJournal(
            url: url, applied: outcome.applied, snapshotBytes: 1 << 30, purgeDelay: 60_000,
            viewSource: { name in executor.views.entry(name)?.live.withLock { $0.definition.source } },
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
        journal.compactAfterStart(definitionItems: outcome.definitionItems, worth: 3001)
        #expect(try eventually { try cluster.sql(snapshots, database: database) == "5\n" })
        journal.close()
        let restored = try ServerProcess(["--postgres", url, "--log-level", "info"])
        #expect(restored.log.contains("2 from snapshots, 0 records replayed"), "\(restored.log)")
        for view in 0..<3 { #expect(try restored.client.get("/v1/views/v\(view)").text == bodies["v\(view)"]) }
    }
}
