import Foundation
import ProcessSupport
import Testing

@Suite(.tags(.liveServer)) struct LiveFeedTests {
    @Test func heldPollIsWokenWithTheMutationsChangeset() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let poll = try HTTPConnection(port: server.port)
        poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=30")
        try waitForHeldPolls(server, 1)
        let mutation = try server.client.mutate("c", [["op": "moveItem", "item": "z", "to": [0, 0]]])
        #expect(mutation.status == 200)
        let response = try poll.readResponse()
        #expect(response.status == 200)
        #expect(response.header("Cache-Control") == "public, max-age=60")
        #expect(response.object["collection"] as? String == "c")
        #expect(response.object["from"] as? String == version)
        #expect(response.object["to"] as? String == mutation.object["version"] as? String)
        #expect(response.object["next"] as? String == "since=\(mutation.object["version"] as? String ?? "")&timeout=30")
        let fromFeed = try JSONSerialization.data(
            withJSONObject: response.object["changes"] ?? [:], options: .sortedKeys)
        let fromMutation = try JSONSerialization.data(
            withJSONObject: mutation.object["changes"] ?? [:], options: .sortedKeys)
        #expect(fromFeed == fromMutation)
    }

    @Test func timeoutAnswersEmptyChangeset() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let started = Date()
        let response = try server.client.get("/v1/collections/c/changes?since=\(version)&timeout=1")
        let elapsed = Date().timeIntervalSince(started)
        #expect(response.status == 200)
        #expect(elapsed >= 0.9 && elapsed < 3.5)
        #expect(response.object["from"] as? String == version && response.object["to"] as? String == version)
        let next = try #require(response.object["next"] as? String)
        #expect(next.hasPrefix("since=\(version)&timeout=1&cursor="))
        #expect(response.header("Cache-Control") == "public, max-age=2")
        let changes = try #require(response.object["changes"] as? [String: Any])
        for kind in ["sections", "items"] {
            let group = try #require(changes[kind] as? [String: [Any]])
            #expect(group.values.allSatisfy { $0.isEmpty })
        }
        let immediate = try server.client.get("/v1/collections/c/changes?since=\(version)&timeout=0")
        #expect(immediate.status == 200)
    }

    @Test func oldVersionGetsOneCoalescedChangeset() throws {
        let (server, version) = try LiveMutationTests.seeded()
        _ = try server.client.mutate("c", [["op": "insertItems", "at": [1, 1], "items": [["id": "n"]]]])
        _ = try server.client.mutate("c", [["op": "moveItem", "item": "n", "to": [0, 0]]])
        let last = try server.client.mutate("c", [["op": "updateItems", "items": [["id": "n", "data": 5]]]])
        let response = try server.client.get("/v1/collections/c/changes?since=\(version)")
        #expect(response.status == 200)
        #expect(response.object["to"] as? String == last.object["version"] as? String)
        let items = try #require((response.object["changes"] as? [String: Any])?["items"] as? [String: Any])
        let inserted = try #require(items["inserted"] as? [[String: Any]])
        #expect(inserted.count == 1)
        #expect(inserted.first?["id"] as? String == "n" && inserted.first?["at"] as? [Int] == [0, 0])
        #expect(inserted.first?["data"] as? Int == 5)
    }

    @Test func missingSinceAnswersResetSnapshot() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let response = try server.client.get("/v1/collections/c/changes")
        #expect(response.status == 200)
        #expect(response.object["reset"] as? Bool == true)
        #expect(response.object["to"] as? String == version)
        let snapshot = try #require(response.object["snapshot"] as? [String: Any])
        #expect(snapshot["version"] as? String == version)
        #expect((snapshot["sections"] as? [Any])?.count == 2)
    }

    @Test func expiredOrForeignCursorsAre410WithCurrent() throws {
        let server = try ServerProcess(["--history", "2"])
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).object["version"] as? String)
        for index in 0..<4 {
            _ = try server.client.mutate("c", [["op": "insertItems", "at": [0, 0], "items": [["id": "i\(index)"]]]])
        }
        let current = try #require(try server.client.get("/v1/collections/c").object["version"] as? String)
        let epoch = current.split(separator: ".")[0]
        let ahead = ["\(epoch).999", "\(epoch).99999999999999999999999"]
        for since in [version, "other.1"] + ahead {
            let response = try server.client.get("/v1/collections/c/changes?since=\(since)")
            #expect(response.status == 410, "\(since)")
            #expect(response.errorCode == "cursor_expired")
            #expect(response.object["current"] as? String == current)
            // A version ahead of the current one is never stored: its URL is one every client polls later.
            let stored = ahead.contains(since) ? "no-store" : "public, max-age=2"
            #expect(response.header("Cache-Control") == stored, "\(since)")
        }
    }

    /// `--history-bytes` bounds what a collection's history keeps, whatever `--history` allows: every collection
    /// kept up to 64 MiB of past changes, so a hundred collections of large writes could hold gigabytes.
    @Test func historyBytesBoundWhatTheFeedKeeps() throws {
        let server = try ServerProcess(["--history", "1000", "--history-bytes", "100000"])
        let first = try #require(
            try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).object["version"] as? String)
        // The history keeps what it needs to walk back: an item's data before each change of it.
        var versions: [String] = []
        for round in 0..<5 {
            let data = String(repeating: "\(round)", count: 40_000)
            let response = try server.client.put("/v1/collections/c/items/i", ["data": data])
            versions.append(try #require(response.object["version"] as? String))
        }
        // About 40 KB a change after the first: the last two fit in 100,000 bytes, the ones before left.
        for since in [first, versions[0], versions[1]] {
            #expect(try server.client.get("/v1/collections/c/changes?since=\(since)").status == 410, "\(since)")
        }
        let recent = try server.client.get("/v1/collections/c/changes?since=\(versions[2])")
        #expect(recent.status == 200)
        #expect(recent.object["to"] as? String == versions[4])
    }

    @Test func badParametersAre400AndUnknownCollection404() throws {
        let (server, version) = try LiveMutationTests.seeded()
        for query in [
            "since=nope", "since=a.b", "since=\(version)&timeout=-1", "since=\(version)&timeout=1.5",
            "since=\(version)&timeout=x",
        ] {
            let response = try server.client.get("/v1/collections/c/changes?\(query)")
            #expect(response.status == 400, "\(query)")
            #expect(response.errorCode == "bad_request")
        }
        #expect(try server.client.get("/v1/collections/ghost/changes?since=\(version)").status == 404)
        let badName = try server.client.get("/v1/collections/-bad/changes")
        #expect(badName.status == 400)
        #expect(badName.header("Cache-Control") == "no-store")
    }

    @Test func deletingTheCollectionAnswersHeldPolls410() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let poll = try HTTPConnection(port: server.port)
        poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=30")
        try waitForHeldPolls(server, 1)
        #expect(try server.client.request("DELETE", "/v1/collections/c").status == 204)
        let response = try poll.readResponse()
        #expect(response.status == 410)
        #expect(response.errorCode == "collection_deleted")
    }

    @Test func oneMutationAnswersAThousandHeldPolls() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let polls = try (0..<1000).map { _ in try HTTPConnection(port: server.port) }
        for poll in polls { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=60") }
        try waitForHeldPolls(server, 1000)
        let mutation = try server.client.mutate("c", [["op": "deleteItems", "items": ["w"]]])
        let newVersion = try #require(mutation.object["version"] as? String)
        var answered = 0
        for poll in polls {
            let response = try poll.readResponse()
            if response.status == 200 && response.object["to"] as? String == newVersion { answered += 1 }
        }
        #expect(answered == 1000)
        let metrics = try server.client.get("/metrics").text
        #expect(metrics.contains("changeserver_held_polls 0"))
        #expect(metrics.contains("changeserver_changesets_delivered_total 1000"))
    }

    /// Held polls answered outside libmicrohttpd get their connections back: every client polls again on its own
    /// connection and is answered again, and a request pipelined behind a poll is answered after it.
    @Test func answeredPollsKeepTheirConnections() throws {
        let (server, first) = try LiveMutationTests.seeded()
        let polls = try (0..<300).map { _ in try HTTPConnection(port: server.port) }
        var version = first
        for round in 0..<3 {
            for poll in polls { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=60") }
            try waitForHeldPolls(server, polls.count)
            let mutation = try server.client.mutate(
                "c", [["op": "insertItems", "at": [0, 0], "items": [["id": "r\(round)"]]]])
            let next = try #require(mutation.object["version"] as? String)
            var answered = 0
            for poll in polls {
                let response = try poll.readResponse()
                if response.status == 200 && response.object["to"] as? String == next { answered += 1 }
            }
            #expect(answered == polls.count, "round \(round)")
            version = next
        }
        let pipelined = try HTTPConnection(port: server.port)
        pipelined.send(
            Array(
                ("GET /v1/collections/c/changes?since=\(version)&timeout=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").utf8))
        try waitForHeldPolls(server, 1)
        _ = try server.client.mutate("c", [["op": "deleteItems", "items": ["r0"]]])
        #expect(try pipelined.readResponse().status == 200)
        #expect(try pipelined.readResponse().status == 200)
    }

    @Test func heldPollCapAnswers429() throws {
        let server = try ServerProcess(["--max-held-polls", "2"])
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let polls = try (0..<2).map { _ in try HTTPConnection(port: server.port) }
        for poll in polls { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=30") }
        try waitForHeldPolls(server, 2)
        let third = try server.client.get("/v1/collections/c/changes?since=\(version)&timeout=30")
        #expect(third.status == 429)
        #expect(third.header("Retry-After") == "1")
        // The refused client's connection closes: kept to retry on, it held one of the connections kept back for
        // `/healthz` and writes.
        let keptAlive = try HTTPConnection(port: server.port)
        keptAlive.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=30")
        let refused = try keptAlive.readResponse()
        #expect(refused.status == 429 && refused.header("Connection") == "close")
        #expect(keptAlive.isClosed(within: 5))
    }
}

/// Waits (at most 10 s) until `/metrics` reports `count` held polls.
func waitForHeldPolls(_ server: ServerProcess, _ count: Int) throws {
    let held = try waitUntil(timeout: 10) {
        try server.metric("changeserver_held_polls") == count
    }
    if !held { Issue.record("the server never held \(count) polls") }
}
