import Foundation
import ProcessSupport
import Testing

/// A server restored from a backup of its `--data-dir`, and `scripts/new-epochs.py` (README, "Durability",
/// *Backups and restores*).
@Suite(.tags(.liveServer)) struct LiveRestoreTests {
    /// The backup is taken while the server is stopped; the server goes on to later versions; then the backup is
    /// restored. The script (starting a server of its own on the restored directory) gives every collection and
    /// view a new epoch with its content unchanged, so a client whose cursor names a version of the lost future
    /// (or of the past) gets `410` and starts over; the new epochs survive a restart. Without the script, new
    /// writes would bring the collection back to that cursor's version with other content.
    @Test func newEpochsAfterARestoreSendEveryClientBackToASnapshot() throws {
        let token = "restore-token"
        let authorized = ["Authorization": "Bearer \(token)"]
        let directory = try ServerProcess.temporaryDirectory()
        let backup = try ServerProcess.temporaryDirectory()
        let workingDirectory = try ServerProcess.temporaryDirectory()
        defer {
            for path in [directory, backup, workingDirectory] { try? FileManager.default.removeItem(atPath: path) }
        }
        var server = try ServerProcess(["--write-token", token], dataDirectory: directory)
        let sections: [[String: Any]] = [
            ["id": "today", "data": ["title": "Today ✓"], "items": [["id": "a", "data": ["n": 1, "t": "日本語"]]]],
            ["id": "later", "items": [["id": "b", "data": ["n": 2]], ["id": "c", "data": NSNull()]]],
        ]
        let created = try server.client.put("/v1/collections/inbox", ["sections": sections], headers: authorized)
        #expect(created.status == 201)
        let empty = try server.client.put("/v1/collections/empty", ["sections": [] as [Any]], headers: authorized)
        #expect(empty.status == 201)
        let definition: [String: Any] = ["source": "inbox", "sortBy": [["field": "/n", "order": "desc"]]]
        #expect(try server.client.put("/v1/views/ranked", definition, headers: authorized).status == 201)
        #expect(server.stop(timeout: 10) == 0)
        try FileManager.default.removeItem(atPath: backup)
        try FileManager.default.copyItem(atPath: directory, toPath: backup)

        server = try ServerProcess(["--write-token", token], dataDirectory: directory)
        for id in ["d", "e"] {
            let upsert = try server.client.put(
                "/v1/collections/inbox/items/\(id)", ["data": ["n": 9]], headers: authorized)
            #expect(upsert.status == 201)
        }
        let lostFuture = try #require(try server.client.get("/v1/collections/inbox").object["version"] as? String)
        let lostViewFuture = try #require(try server.client.get("/v1/views/ranked").object["version"] as? String)
        #expect(server.stop(timeout: 10) == 0)

        let restored = try ServerProcess(["--write-token", token], dataDirectory: backup)
        let before = (
            inbox: try restored.client.get("/v1/collections/inbox").object,
            view: try restored.client.get("/v1/views/ranked").object,
            empty: try restored.client.get("/v1/collections/empty").object
        )
        let oldVersion = try #require(before.inbox["version"] as? String)
        let oldViewVersion = try #require(before.view["version"] as? String)
        #expect(Self.epoch(oldVersion) == Self.epoch(lostFuture))
        #expect(restored.stop(timeout: 10) == 0)

        // The operator's shell may hold a token for the server: the script's own server must not take it.
        let run = try ProgramRun.run(
            [
                TestPython.executable, Repository.root.path + "/scripts/new-epochs.py", "--data-dir", backup,
                "--server", ServerProcess.binary.path,
            ], in: URL(fileURLWithPath: workingDirectory), environment: ["CHANGESERVER_WRITE_TOKEN": "x"],
            timeout: 120)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("collection inbox: \(oldVersion) -> "), "\(run.output)")
        #expect(run.output.contains("view ranked: \(oldViewVersion) -> "), "\(run.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: workingDirectory).isEmpty, "the copies are left")

        var renewed = try ServerProcess(["--write-token", token], dataDirectory: backup)
        try Self.expectNewEpochs(on: renewed, before: before, lost: (lostFuture, lostViewFuture))
        // The new epochs are durable: a restart keeps them.
        #expect(renewed.stop(timeout: 10) == 0)
        renewed = try ServerProcess(["--write-token", token], dataDirectory: backup)
        try Self.expectNewEpochs(on: renewed, before: before, lost: (lostFuture, lostViewFuture))
    }

    /// Every subject has another epoch and the same content, and every cursor from before (the restored past and the
    /// lost future) is `410 cursor_expired`; the new version is followed as usual.
    private static func expectNewEpochs(
        on server: ServerProcess, before: (inbox: [String: Any], view: [String: Any], empty: [String: Any]),
        lost: (inbox: String, view: String)
    ) throws {
        let after = try server.client.get("/v1/collections/inbox").object
        let viewAfter = try server.client.get("/v1/views/ranked").object
        let emptyAfter = try server.client.get("/v1/collections/empty").object
        let newVersion = try #require(after["version"] as? String)
        let oldVersion = try #require(before.inbox["version"] as? String)
        let oldViewVersion = try #require(before.view["version"] as? String)
        #expect(epoch(newVersion) != epoch(oldVersion))
        #expect(epoch(viewAfter["version"]) != epoch(oldViewVersion))
        #expect(epoch(emptyAfter["version"]) != epoch(before.empty["version"]))
        #expect(same(after["sections"], before.inbox["sections"]))
        #expect(same(viewAfter["sections"], before.view["sections"]))
        #expect(same(viewAfter["definition"], before.view["definition"]))
        for (path, cursor) in [
            ("/v1/collections/inbox", lost.inbox), ("/v1/collections/inbox", oldVersion),
            ("/v1/views/ranked", lost.view), ("/v1/views/ranked", oldViewVersion),
        ] {
            let poll = try server.client.get("\(path)/changes?since=\(cursor)&timeout=0")
            #expect(poll.status == 410, "\(path) since \(cursor): \(poll.text)")
            #expect((poll.object["error"] as? [String: Any])?["code"] as? String == "cursor_expired")
        }
        let fresh = try server.client.get("/v1/collections/inbox/changes?since=\(newVersion)&timeout=0")
        #expect(fresh.status == 200, "\(fresh.text)")
    }

    /// Through a server's URL: with its token the script renews; without it, it stops at the first deletion with
    /// nothing changed and names the folder of its copies; with a body limit below a collection's size it changes
    /// nothing and keeps no copies. On a directory another server holds, its own server cannot start, and it says so.
    @Test func refusalsChangeNothing() throws {
        let server = try ServerProcess(["--write-token", "secret"])
        let headers = ["Authorization": "Bearer secret"]
        let sections = [["id": "s", "items": [["id": "a", "data": String(repeating: "x", count: 100)]]]]
        #expect(try server.client.put("/v1/collections/inbox", ["sections": sections], headers: headers).status == 201)
        let workingDirectory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: workingDirectory) }
        func version() throws -> String? { try server.client.get("/v1/collections/inbox").object["version"] as? String }
        func script(_ arguments: [String]) throws -> ProgramRun {
            try ProgramRun.run(
                [TestPython.executable, Repository.root.path + "/scripts/new-epochs.py"] + arguments,
                in: URL(fileURLWithPath: workingDirectory), timeout: 60)
        }
        let url = "http://127.0.0.1:\(server.port)"
        let original = try version()

        let tooLarge = try script([url, "--token", "secret", "--max-body-bytes", "50"])
        #expect(tooLarge.status != 0)
        #expect(tooLarge.output.contains("over the body limit of 50: nothing was changed"), "\(tooLarge.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: workingDirectory).isEmpty)
        #expect(try version() == original)

        let held = try script(["--data-dir", server.dataDirectory, "--server", ServerProcess.binary.path])
        #expect(held.status != 0)
        #expect(held.output.contains("the server did not start on \(server.dataDirectory)"), "\(held.output)")
        #expect(try version() == original)

        let unauthorized = try script([url])
        #expect(unauthorized.status != 0)
        #expect(unauthorized.output.contains("DELETE /v1/collections/inbox: 401"), "\(unauthorized.output)")
        let folder = URL(fileURLWithPath: workingDirectory).standardizedFileURL.path + "/new-epochs-"
        #expect(unauthorized.output.contains("were not changed (copies in \(folder)"), "\(unauthorized.output)")
        #expect(try version() == original)

        let renewed = try script([url, "--token", "secret"])
        #expect(renewed.status == 0, "\(renewed.output)")
        #expect(try Self.epoch(version()) != Self.epoch(original))
    }

    /// Through a `--postgres` server's URL: every collection and view takes a new epoch with its content, old
    /// cursors are `410` on that server and on one started afterwards, and the new content survives the deleted
    /// collections' purge (`--purge-delay-seconds 0`: the old records leave the database at once).
    @Test func newEpochsThroughAServerOnPostgreSQL() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("restored")
        let workingDirectory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: workingDirectory) }
        let server = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "0"])
        let sections = [["id": "s", "items": [["id": "a", "data": 1], ["id": "b", "data": ["x": "é"]]]]]
        #expect(try server.client.put("/v1/collections/inbox", ["sections": sections]).status == 201)
        #expect(try server.client.put("/v1/collections/inbox/items/c", ["data": 3]).status == 201)
        #expect(try server.client.put("/v1/views/all", ["source": "inbox"]).status == 201)
        let before = (
            inbox: try server.client.get("/v1/collections/inbox").object,
            view: try server.client.get("/v1/views/all").object
        )
        let lastOldRecord = try cluster.sql(
            "SELECT last_seq FROM changeserver_collections WHERE name = 'inbox'", database: "restored"
        ).trimmingCharacters(in: .whitespacesAndNewlines)
        let run = try ProgramRun.run(
            [
                TestPython.executable, Repository.root.path + "/scripts/new-epochs.py",
                "http://127.0.0.1:\(server.port)",
            ], in: URL(fileURLWithPath: workingDirectory), timeout: 60)
        #expect(run.status == 0, "\(run.output)")
        let other = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "0"])
        for each in [server, other] {
            let inbox = try each.client.get("/v1/collections/inbox").object
            let view = try each.client.get("/v1/views/all").object
            #expect(Self.epoch(inbox["version"]) != Self.epoch(before.inbox["version"]))
            #expect(Self.epoch(view["version"]) != Self.epoch(before.view["version"]))
            #expect(Self.same(inbox["sections"], before.inbox["sections"]))
            #expect(Self.same(view["sections"], before.view["sections"]))
            for path in ["/v1/collections/inbox", "/v1/views/all"] {
                let cursor = try #require((path.contains("views") ? before.view : before.inbox)["version"] as? String)
                #expect(try each.client.get("\(path)/changes?since=\(cursor)&timeout=0").status == 410)
            }
        }
        #expect(other.stop(timeout: 10) == 0)
        // The deleted collection's records leave the database; the new one's stay, and a start reads them.
        let oldRecords =
            "SELECT count(*) FROM changeserver_records WHERE collection = 'inbox' AND seq <= \(lastOldRecord)"
        #expect(Int(lastOldRecord) ?? 0 > 0)
        _ = try waitUntil(timeout: 30) { try cluster.sql(oldRecords, database: "restored") == "0\n" }
        #expect(try cluster.sql(oldRecords, database: "restored") == "0\n")
        let restarted = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "0"])
        #expect(
            Self.same(try restarted.client.get("/v1/collections/inbox").object["sections"], before.inbox["sections"]))
    }

    private static func epoch(_ version: Any?) -> Substring? {
        (version as? String)?.split(separator: ".").first
    }

    /// Whether both are there and the same JSON (keys sorted, as `ItemMirror` compares data).
    private static func same(_ left: Any?, _ right: Any?) -> Bool {
        guard let left, let right else { return false }
        return ItemMirror.text(left) == ItemMirror.text(right)
    }
}
