import Foundation
import ProcessSupport
import Testing

/// Views on the real server: a poll held on a view wakes when its source commits, and a view (content, versions,
/// kept history) survives a restart, a `kill -9` and a snapshot, so that a cursor on it goes on.
@Suite(.tags(.liveServer)) struct LiveViewTests {
    private static var board: [String: Any] {
        [
            "source": "tasks", "sectionBy": ["field": "/status"], "sortBy": [["field": "/priority", "order": "desc"]],
        ]
    }

    private static func fill(_ client: Client, count: Int) throws {
        let items = (0..<count).map { index -> [String: Any] in
            ["id": "t\(index)", "data": ["status": ["open", "doing", "done"][index % 3], "priority": index % 7]]
        }
        #expect(try client.put("/v1/collections/tasks", ["sections": [["id": "s", "items": items]]]).status == 201)
    }

    private static func sections(_ response: HTTPResponse) -> [[String: Any]] {
        response.object["sections"] as? [[String: Any]] ?? []
    }

    private static func ids(_ response: HTTPResponse) -> [[String]] {
        sections(response).map { ($0["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String } }
    }

    @Test func aPollHeldOnAViewWakesWhenItsSourceCommits() throws {
        let server = try ServerProcess()
        try Self.fill(server.client, count: 6)
        let defined = try server.client.put("/v1/views/board", Self.board)
        #expect(defined.status == 201)
        let version = try #require(defined.object["version"] as? String)
        let poll = try HTTPConnection(port: server.port)
        poll.sendRequest("GET", "/v1/views/board/changes?since=\(version)&timeout=30", close: true)
        #expect(
            try waitUntil(timeout: 10) {
                try server.client.get("/metrics").text.contains("changeserver_held_polls 1\n")
            })
        _ = try server.client.put("/v1/collections/tasks/items/t0", ["data": ["status": "blocked", "priority": 1]])
        let answer = try poll.readResponse()
        #expect(answer.status == 200)
        #expect(answer.object["view"] as? String == "board")
        #expect(answer.object["from"] as? String == version)
        let inserted = ((answer.object["changes"] as? [String: Any])?["sections"] as? [String: Any])?["inserted"]
        #expect((inserted as? [[String: Any]])?.first?["id"] as? String == #""blocked""#)
    }

    @Test(arguments: [false, true])
    func aViewAndItsCursorsSurviveARestartAndKillNine(kill: Bool) throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments = ["--fsync", "always", "--snapshot-bytes", "4096"]
        var server = try ServerProcess(arguments, dataDirectory: directory)
        try Self.fill(server.client, count: 60)
        let defined = try server.client.put("/v1/views/board", Self.board)
        let cursor = try #require(defined.object["version"] as? String)
        for index in 0..<40 {
            let data: [String: Any] = ["status": ["open", "doing", "blocked"][index % 3], "priority": index % 11]
            #expect(try server.client.put("/v1/collections/tasks/items/t\(index)", ["data": data]).status == 200)
        }
        // Snapshots are written in the background: wait for one (every 4 KiB of journal) before stopping.
        #expect(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: directory + "/snapshot.bin") })
        let before = try server.client.get("/v1/views/board")
        let caughtUp = try server.client.get("/v1/views/board/changes?since=\(cursor)")
        if kill {
            #expect(server.stop(signal: SIGKILL) != nil)
        } else {
            #expect(server.stop() == 0)
        }
        server = try ServerProcess(arguments, dataDirectory: directory)
        let after = try server.client.get("/v1/views/board")
        #expect(after.object["version"] as? String == before.object["version"] as? String)
        #expect(Self.ids(after) == Self.ids(before))
        let resumed = try server.client.get("/v1/views/board/changes?since=\(cursor)")
        #expect(resumed.status == 200)
        #expect(resumed.text == caughtUp.text)
        // The recovered view is what its definition gives on the recovered source.
        #expect(try server.client.put("/v1/views/fresh", Self.board).status == 201)
        #expect(Self.ids(try server.client.get("/v1/views/fresh")) == Self.ids(after))
        // The view came back from a snapshot (taken every 4 KiB of journal), not only from the journal.
        let recovered = server.log.split(separator: "\n").first { $0.contains("recovered") } ?? ""
        #expect(recovered.contains("and 1 views"), "\(recovered)")
        #expect(!recovered.contains(": 0 from the snapshot"), "\(recovered)")
    }

    /// Views that each show one owner's items (a gate: `eq` or `in` on a field) come back from a snapshot as they
    /// were, their indexes rebuilt from the items their gates let through (`GateIndex`), beside a view without a
    /// gate: the same content and version, a cursor goes on, and a write that moves an item from one owner to
    /// another changes both owners' views.
    @Test func gatedViewsComeBackFromASnapshotAsTheyWere() throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments = ["--fsync", "always", "--snapshot-bytes", "4096"]
        var server = try ServerProcess(arguments, dataDirectory: directory)
        let owners = ["u0", "u1", "u2", "u3"]
        func data(_ index: Int, owner: String) -> [String: Any] {
            ["owner": owner, "status": ["open", "doing", "blocked"][index % 3], "priority": index % 7]
        }
        let items = (0..<60).map { ["id": "t\($0)", "data": data($0, owner: owners[$0 % 4])] as [String: Any] }
        #expect(
            try server.client.put("/v1/collections/tasks", ["sections": [["id": "s", "items": items]]]).status == 201)
        let sortBy = [["field": "/priority", "order": "desc"]]
        var definitions: [String: [String: Any]] = ["all": ["source": "tasks", "sortBy": sortBy]]
        for owner in owners {
            definitions["mine-\(owner)"] = [
                "source": "tasks", "sortBy": sortBy,
                "filter": ["all": [["field": "/owner", "eq": owner], ["field": "/priority", "ge": 1]]],
            ]
        }
        definitions["open"] = [
            "source": "tasks", "sectionBy": ["field": "/status"],
            "filter": ["field": "/status", "in": ["open", "blocked"]],
        ]
        var cursors: [String: String] = [:]
        for (name, definition) in definitions {
            cursors[name] = try #require(
                try server.client.put("/v1/views/\(name)", definition).object["version"] as? String)
        }
        for index in 0..<40 {
            let status = try server.client.put(
                "/v1/collections/tasks/items/t\(index)", ["data": data(index + 1, owner: owners[(index + 1) % 4])]
            ).status
            #expect(status == 200)
        }
        #expect(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: directory + "/snapshot.bin") })
        var before: [String: String] = [:]
        var caughtUp: [String: String] = [:]
        for name in definitions.keys {
            before[name] = try server.client.get("/v1/views/\(name)").text
            caughtUp[name] = try server.client.get("/v1/views/\(name)/changes?since=\(cursors[name] ?? "")").text
        }
        #expect(server.stop() == 0)
        server = try ServerProcess(arguments, dataDirectory: directory)
        let recovered = server.log.split(separator: "\n").first { $0.contains("recovered") } ?? ""
        #expect(recovered.contains("and 6 views from the snapshot"), "\(recovered)")
        for name in definitions.keys {
            #expect(try server.client.get("/v1/views/\(name)").text == before[name], "\(name)")
            let resumed = try server.client.get("/v1/views/\(name)/changes?since=\(cursors[name] ?? "")")
            #expect(resumed.status == 200 && resumed.text == caughtUp[name], "\(name)")
        }
        // t0 (u1's now, priority 1) goes to u2: it leaves u1's view and enters u2's.
        let versions = try owners.map {
            try #require(try server.client.get("/v1/views/mine-\($0)").object["version"] as? String)
        }
        #expect(try server.client.put("/v1/collections/tasks/items/t0", ["data": data(1, owner: "u2")]).status == 200)
        for (owner, version) in zip(owners, versions) {
            let changes = try server.client.get("/v1/views/mine-\(owner)/changes?since=\(version)&timeout=0")
            let items = changes.object["changes"].flatMap { ($0 as? [String: Any])?["items"] as? [String: Any] }
            let moved = ["u1": "deleted", "u2": "inserted"][owner]
            #expect(
                ((items?[moved ?? ""] as? [Any])?.count ?? 0) == (moved == nil ? 0 : 1), "\(owner): \(changes.text)")
        }
        // Each restored view is what its definition gives on the source now.
        for (name, definition) in definitions {
            #expect(try server.client.put("/v1/views/fresh-\(name)", definition).status == 201)
            #expect(
                Self.ids(try server.client.get("/v1/views/fresh-\(name)"))
                    == Self.ids(try server.client.get("/v1/views/\(name)")), "\(name)")
        }
    }
}
