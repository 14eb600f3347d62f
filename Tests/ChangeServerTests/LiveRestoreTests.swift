import Foundation
import ProcessSupport
import Testing

/// A server restored from a backup of its `--data-dir`, and `scripts/new-epochs.py` (README, "Backups and
/// restores").
@Suite(.tags(.liveServer)) struct LiveRestoreTests {
    /// The backup is taken while the server is stopped; the server goes on to later versions; then the backup is
    /// restored. The script gives every collection and view a new epoch with its content unchanged, so a client
    /// whose cursor names a version of the lost future (or of the past) gets `410` and starts over; the new
    /// epochs survive a restart. Without the script, new writes would bring the collection back to that cursor's
    /// version with other content, and the client would be sent changesets from a past it never saw.
    @Test func newEpochsAfterARestoreSendEveryClientBackToASnapshot() throws {
        let token = "restore-token"
        let authorized = ["Authorization": "Bearer \(token)"]
        let directory = try ServerProcess.temporaryDirectory()
        let backup = try ServerProcess.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: backup)
        }
        var server = try ServerProcess(["--write-token", token], dataDirectory: directory)
        let sections: [[String: Any]] = [
            ["id": "today", "data": ["title": "Today"], "items": [["id": "a", "data": ["n": 1]]]],
            ["id": "later", "items": [["id": "b", "data": ["n": 2]], ["id": "c", "data": NSNull()]]],
        ]
        #expect(
            try server.client.put("/v1/collections/inbox", ["sections": sections], headers: authorized).status == 201)
        #expect(
            try server.client.put("/v1/collections/empty", ["sections": [] as [Any]], headers: authorized).status == 201
        )
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
        let before = try restored.client.get("/v1/collections/inbox").object
        let viewBefore = try restored.client.get("/v1/views/ranked").object
        let emptyBefore = try restored.client.get("/v1/collections/empty").object
        let oldVersion = try #require(before["version"] as? String)
        let oldViewVersion = try #require(viewBefore["version"] as? String)
        #expect(oldVersion.split(separator: ".")[0] == lostFuture.split(separator: ".")[0])

        let run = try ProgramRun.run(
            [
                TestPython.executable, "scripts/new-epochs.py", "http://127.0.0.1:\(restored.port)", "--token",
                token,
            ], in: Repository.root, timeout: 60)
        #expect(run.status == 0, "\(run.output)")
        Self.removeSavedCopies(named: run.output)
        #expect(run.output.contains("collection inbox: \(oldVersion) -> "), "\(run.output)")
        // The view moved twice under its old epoch on the way (its source deleted, then created again) before it
        // was defined again.
        #expect(run.output.contains("view ranked: \(Self.epoch(oldViewVersion) ?? "")."), "\(run.output)")

        try Self.expectNewEpochs(
            on: restored, before: (before, viewBefore, emptyBefore), lost: (lostFuture, lostViewFuture))
        // The new epochs are durable: a restart keeps them.
        #expect(restored.stop(timeout: 10) == 0)
        let restarted = try ServerProcess(["--write-token", token], dataDirectory: backup)
        try Self.expectNewEpochs(
            on: restarted, before: (before, viewBefore, emptyBefore), lost: (lostFuture, lostViewFuture))
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

    /// Without the write token the script stops at the first refusal, naming it, and changes nothing.
    @Test func newEpochsWithoutTheTokenChangeNothing() throws {
        let server = try ServerProcess(["--write-token", "secret"])
        let headers = ["Authorization": "Bearer secret"]
        #expect(
            try server.client.put("/v1/collections/inbox", ["sections": [] as [Any]], headers: headers).status == 201)
        let version = try server.client.get("/v1/collections/inbox").object["version"] as? String
        let run = try ProgramRun.run(
            [TestPython.executable, "scripts/new-epochs.py", "http://127.0.0.1:\(server.port)"], in: Repository.root,
            timeout: 60)
        #expect(run.status != 0)
        Self.removeSavedCopies(named: run.output)
        #expect(run.output.contains("DELETE /v1/collections/inbox: 401"), "\(run.output)")
        #expect(try server.client.get("/v1/collections/inbox").object["version"] as? String == version)
    }

    /// Removes the folder where the script saved what it deleted, which its first line names.
    private static func removeSavedCopies(named output: String) {
        guard let start = output.range(of: " saved in "), let end = output.range(of: " before it is deleted") else {
            return
        }
        try? FileManager.default.removeItem(atPath: String(output[start.upperBound..<end.lowerBound]))
    }

    private static func epoch(_ version: Any?) -> Substring? {
        (version as? String)?.split(separator: ".").first
    }

    private static func same(_ left: Any?, _ right: Any?) -> Bool {
        guard let left, let right,
            let leftData = try? JSONSerialization.data(withJSONObject: left, options: [.sortedKeys]),
            let rightData = try? JSONSerialization.data(withJSONObject: right, options: [.sortedKeys])
        else { return false }
        return leftData == rightData
    }
}
