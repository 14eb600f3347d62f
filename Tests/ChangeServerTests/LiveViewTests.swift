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
}
