import Foundation
import ProcessSupport
import Synchronization
import Testing

/// The change feed as Server-Sent Events against a live server (API.md, "Stream"): events in order, resuming with
/// `Last-Event-ID`, `gone`, heartbeats, the bound on a slow reader, `--max-held-polls`, and shutdown.
@Suite(.tags(.liveServer)) struct LiveStreamTests {
    private static func collection(_ server: ServerProcess, _ name: String = "c") throws -> String {
        let created = try server.client.put("/v1/collections/\(name)", ["sections": [["id": "s"]]])
        return try #require(created.object["version"] as? String)
    }

    private static func insert(_ server: ServerProcess, _ id: String, data: Any = 1, name: String = "c") throws
        -> String
    {
        let answer = try server.client.mutate(
            name, [["op": "insertItems", "at": [0, 0], "items": [["id": id, "data": data]]]])
        return try #require(answer.object["version"] as? String)
    }

    static let bigData = String(repeating: "y", count: 64 * 1024)

    /// A stream on a new collection `c` whose reader reads nothing, and events of 64 KiB until the server's socket
    /// to it is full (`fillUntilItsSocketIsFull`); the reader and the versions inserted.
    private static func streamWithAFullSocket(_ server: ServerProcess) throws -> (EventStreamReader, [String]) {
        let first = try collection(server)
        let reader = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes?since=\(first)", receiveBuffer: 65536)
        try waitForMetric(server, "changeserver_streams_open", 1)
        return (reader, try fillUntilItsSocketIsFull(server, reader))
    }

    /// Inserts events of 64 KiB into collection `c` until the server's side of the reader's connection stops taking
    /// them (its send queue, settled after each insert, no longer grows); the versions inserted.
    private static func fillUntilItsSocketIsFull(_ server: ServerProcess, _ reader: EventStreamReader) throws
        -> [String]
    {
        let clientPort = reader.connection.localPort
        func settledQueue() throws -> Int {
            var last = -1
            for _ in 0..<100 {
                let now = try #require(LoopbackTCP.sendQueue(serverPort: server.port, clientPort: clientPort))
                if now == last { return now }
                last = now
                usleep(50_000)
            }
            return last
        }
        var versions: [String] = []
        var queued = try settledQueue()
        while versions.count < 300 {
            versions.append(try insert(server, "e\(versions.count)", data: bigData))
            let now = try settledQueue()
            if now > 0 && now == queued { return versions }
            queued = now
        }
        Issue.record("the server's socket never filled")
        return versions
    }

    private static func waitForMetric(_ server: ServerProcess, _ name: String, _ value: Int) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try server.metric(name) == value { return }
            usleep(10_000)
        }
        Issue.record("\(name) never became \(value)")
    }

    @Test func eventsArriveInOrderAcrossAThousandRandomMutations() throws {
        let server = try ServerProcess()
        let first = try Self.collection(server)
        let stream = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(first)")
        #expect(stream.status == 200)
        #expect(stream.headers["content-type"] == "text/event-stream; charset=utf-8")
        #expect(stream.headers["cache-control"] == "no-store")
        #expect(stream.headers["x-accel-buffering"] == "no")
        var generator = SystemRandomNumberGenerator()
        var ids: [String] = []
        var last = first
        for index in 0..<1000 {
            let ops: [[String: Any]]
            switch (ids.isEmpty, Int.random(in: 0..<4, using: &generator)) {
            case (true, _), (_, 0):
                ops = [
                    ["op": "insertItems", "at": [0, Int.random(in: 0...ids.count)], "items": [["id": "i\(index)"]]]
                ]
                ids.append("i\(index)")
            case (_, 1):
                let id = ids.remove(at: Int.random(in: 0..<ids.count))
                ops = [["op": "deleteItems", "items": [id]]]
            case (_, 2):
                ops = [
                    ["op": "moveItem", "item": ids.randomElement() ?? "", "to": [0, Int.random(in: 0..<ids.count)]]
                ]
            default:
                ops = [["op": "updateItems", "items": [["id": ids.randomElement() ?? "", "data": index]]]]
            }
            let answer = try server.client.mutate("c", ops)
            #expect(answer.status == 200)
            last = answer.object["version"] as? String ?? last
        }
        var at = first
        var events = 0
        while at != last {
            let event = try #require(try stream.nextEvent())
            #expect(event.name == "changes")
            #expect(event.object["from"] as? String == at, "event \(events) does not start where the last ended")
            let to = try #require(event.object["to"] as? String)
            #expect(event.id == to)
            #expect(event.object["next"] as? String == "since=\(to)&timeout=25")
            at = to
            events += 1
        }
        #expect(events >= 1 && events <= 1000)
        #expect(try server.metric("changeserver_streams_open") == 1)
        let snapshot = try server.client.get("/v1/collections/c").object
        let items = ((snapshot["sections"] as? [[String: Any]])?.first?["items"] as? [[String: Any]])?.count
        #expect(items == ids.count)
    }

    /// Eight writers at once, each on a thread of its own: commits may come faster than they are fanned out, and
    /// a stream that falls behind then gets one event covering what it missed (`StreamHub.catchUp`). Every stream
    /// still gets every change, in order, and ends equal to the snapshot.
    @Test func concurrentWritersReachEveryStreamWholeAndInOrder() throws {
        let server = try ServerProcess()
        let first = try Self.collection(server)
        let streams = try (0..<8).map { _ in
            try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(first)")
        }
        try Self.waitForMetric(server, "changeserver_streams_open", streams.count)
        let (writers, each) = (8, 40)
        let refused = Mutex(0)
        let done = DispatchGroup()
        for writer in 0..<writers {
            done.enter()
            Thread {
                let client = server.client
                for index in 0..<each {
                    let item: [String: Any] = ["id": "w\(writer)-\(index)", "data": index]
                    let answer = try? client.mutate("c", [["op": "insertItems", "at": [0, 0], "items": [item]]])
                    if answer?.status != 200 { refused.withLock { $0 += 1 } }
                }
                done.leave()
            }.start()
        }
        #expect(done.wait(timeout: .now() + 120) == .success)
        #expect(refused.withLock { $0 } == 0)
        let snapshot = ItemMirror(snapshot: try server.client.get("/v1/collections/c").object)
        #expect(snapshot.items.count == writers * each)
        var events = 0
        for stream in streams {
            var mirror = ItemMirror(snapshot: ["version": first, "sections": [["id": "s", "items": []]]])
            while mirror.version != snapshot.version {
                let event = try #require(try stream.nextEvent())
                #expect(event.name == "changes")
                let applied = mirror.apply(poll: event.object)
                try #require(applied, "event \(events) does not apply at \(mirror.version)")
                #expect(event.id == mirror.version)
                events += 1
            }
            #expect(mirror == snapshot)
        }
    }

    /// A stream whose client leaves is let go as soon as the client closes its side (its socket is watched), not
    /// at the next heartbeat 15 s later: it no longer counts toward `--max-held-polls` nor holds a descriptor.
    @Test func aStreamWhoseClientLeavesIsLetGoAtOnce() throws {
        let server = try ServerProcess()
        _ = try Self.collection(server)
        let stream = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes")
        #expect(try stream.nextEvent()?.name == "reset")
        try Self.waitForMetric(server, "changeserver_streams_open", 1)
        stream.connection.close()
        let deadline = Date().addingTimeInterval(10)
        while try server.metric("changeserver_streams_open") != 0 && Date() < deadline { usleep(10_000) }
        #expect(try server.metric("changeserver_streams_open") == 0)
    }

    /// The connection a test leaves idle on the server's loop before its streams open.
    enum IdleConnection: CaseIterable {
        /// Held polls answered over keep-alive, as a cache's connections to the origin are (answered outside
        /// libmicrohttpd, then handed back to it).
        case answeredPolls
        /// Plain keep-alive requests.
        case plainRequests
    }

    /// Streams whose clients leave give their descriptors back at once also behind older connections that sit
    /// idle on the same loop. libmicrohttpd frees a connection whose content reader ended with an error only when it
    /// visits it again, and it visited connections with its own idle timeout from the least recently active one up
    /// to the first still open: behind an idle keep-alive connection (a cache's connections to the origin after a
    /// run through nginx or Varnish), every such stream kept its socket until that connection timed out, 120 s.
    @Test(arguments: IdleConnection.allCases)
    func streamsWhoseClientsLeaveBehindAnIdleConnectionGiveTheirDescriptorsBack(_ idle: IdleConnection) throws {
        let server = try ServerProcess(["--threads", "1"])
        let version = try Self.collection(server)
        let pid = server.process.processIdentifier
        let kept = try (0..<4).map { _ in try HTTPConnection(port: server.port) }
        switch idle {
        case .answeredPolls:
            for poll in kept { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=60") }
            try waitForHeldPolls(server, kept.count)
            _ = try Self.insert(server, "a")
        case .plainRequests:
            for connection in kept { connection.sendRequest("GET", "/healthz") }
        }
        for connection in kept { #expect(try connection.readResponse().status == 200) }
        let baseline = OpenDescriptors(of: pid)
        let streams = try (0..<50).map { _ in
            try EventStreamReader(port: server.port, path: "/v1/collections/c/changes")
        }
        var started = 0
        for stream in streams {
            if try stream.nextEvent()?.name == "reset" { started += 1 }
        }
        #expect(started == streams.count)
        try Self.waitForMetric(server, "changeserver_streams_open", streams.count)
        for stream in streams { stream.connection.close() }
        try Self.waitForMetric(server, "changeserver_streams_open", 0)
        let ownPorts = Set(streams.map(\.connection.localPort) + kept.map(\.localPort))
        let released = waitUntil(timeout: 30) {
            let now = OpenDescriptors(of: pid)
            return now.count - now.foreignConnections(on: server.port, ownPorts: ownPorts) <= baseline.count
        }
        #expect(released, "open since the streams started: \(OpenDescriptors(of: pid).added(since: baseline))")
        // The idle connections are still served.
        for connection in kept {
            connection.sendRequest("GET", "/healthz")
            #expect(try connection.readResponse().status == 200)
        }
    }

    @Test func resumesFromLastEventIDAfterTheConnectionIsCut() throws {
        let server = try ServerProcess()
        _ = try Self.collection(server)
        let stream = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes")
        let reset = try #require(try stream.nextEvent())
        #expect(reset.name == "reset")
        #expect(reset.object["reset"] as? Bool == true)
        let start = try #require(reset.id)
        #expect(reset.object["to"] as? String == start)
        let second = try Self.insert(server, "a")
        #expect(try stream.nextEvent()?.id == second)
        stream.connection.close()
        try Self.waitForMetric(server, "changeserver_streams_open", 0)
        _ = try Self.insert(server, "b")
        let fourth = try Self.insert(server, "c")
        let resumed = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes", headers: ["Last-Event-ID": second])
        let caughtUp = try #require(try resumed.nextEvent())
        #expect(caughtUp.name == "changes")
        #expect(caughtUp.object["from"] as? String == second && caughtUp.id == fourth)
        try Self.waitForMetric(server, "changeserver_streams_open", 1)
        let explicit = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes?since=\(fourth)", headers: ["Last-Event-ID": start])
        let fifth = try Self.insert(server, "d")
        #expect(try explicit.nextEvent()?.object["from"] as? String == fourth, "since wins over an older Last-Event-ID")
        #expect(try resumed.nextEvent()?.id == fifth)
        // An EventSource opened with `since` reconnects to that same URL, adding the id of the last event it got:
        // the stream goes on from there, not from the URL's `since` (whose changes the client has applied).
        let reconnected = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes?since=\(start)", headers: ["Last-Event-ID": fourth])
        let fromLastEvent = try #require(try reconnected.nextEvent())
        #expect(fromLastEvent.object["from"] as? String == fourth && fromLastEvent.id == fifth)
        // One of another epoch (a collection deleted and created again since) does not: `since` answers.
        let otherEpoch = "zzzzzzzzzzzz." + (fourth.split(separator: ".").last.map(String.init) ?? "4")
        let stale = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes?since=\(start)", headers: ["Last-Event-ID": otherEpoch])
        #expect(try stale.nextEvent()?.object["from"] as? String == start)
    }

    @Test func goneOnExpiryAndOnDeletionThenTheStreamEnds() throws {
        let server = try ServerProcess(["--history", "2"])
        let first = try Self.collection(server)
        for index in 0..<4 { _ = try Self.insert(server, "i\(index)") }
        let expired = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(first)")
        #expect(expired.status == 200)
        let gone = try #require(try expired.nextEvent())
        #expect(gone.name == "gone")
        #expect((gone.object["error"] as? [String: Any])?["code"] as? String == "cursor_expired")
        #expect(gone.object["current"] is String)
        #expect(try expired.nextEvent() == nil && expired.ended)

        let current = try #require(try server.client.get("/v1/collections/c").object["version"] as? String)
        let following = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(current)")
        try Self.waitForMetric(server, "changeserver_streams_open", 1)
        #expect(try server.client.request("DELETE", "/v1/collections/c").status == 204)
        let deleted = try #require(try following.nextEvent())
        #expect(deleted.name == "gone")
        #expect((deleted.object["error"] as? [String: Any])?["code"] as? String == "collection_deleted")
        #expect(try following.nextEvent() == nil && following.ended)
        try Self.waitForMetric(server, "changeserver_streams_open", 0)
    }

    @Test func errorsBeforeTheStreamAreJSONAndStreamsCountTowardMaxHeldPolls() throws {
        let server = try ServerProcess(["--max-held-polls", "1"])
        let first = try Self.collection(server)
        let headers = ["Accept": "text/event-stream"]
        #expect(try server.client.get("/v1/collections/c/changes?since=nope", headers: headers).status == 400)
        #expect(
            try server.client.get("/v1/collections/c/changes", headers: headers.merging(["Last-Event-ID": "x"]) { $1 })
                .status == 400)
        #expect(try server.client.get("/v1/collections/ghost/changes", headers: headers).status == 404)
        let stream = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(first)")
        #expect(stream.status == 200)
        try Self.waitForMetric(server, "changeserver_streams_open", 1)
        let refused = try server.client.get("/v1/collections/c/changes?since=\(first)", headers: headers)
        #expect(refused.status == 429)
        #expect(refused.errorCode == "too_many_polls")
        #expect(try server.client.get("/v1/collections/c/changes?since=\(first)&timeout=5").status == 429)
    }

    /// A `HEAD` of a stream (a collection's or a view's, with and without `since`) is its headers alone: nothing
    /// follows them on the connection, which closes, since the length of what a `GET` would send is unknown.
    /// libmicrohttpd sent a chunked answer's last chunk (`0\r\n\r\n`) after them, which a client keeping the
    /// connection read as the start of its next answer.
    @Test func aHeadOfAStreamIsItsHeadersAlone() throws {
        let server = try ServerProcess()
        let first = try Self.collection(server)
        #expect(try server.client.put("/v1/views/v", ["source": "c"]).status == 201)
        for path in ["/v1/collections/c/changes", "/v1/collections/c/changes?since=\(first)", "/v1/views/v/changes"] {
            let connection = try HTTPConnection(port: server.port)
            connection.sendRequest("HEAD", path, headers: ["Accept": "text/event-stream"])
            let response = try connection.readResponse(method: "HEAD")
            #expect(response.status == 200, "\(path)")
            #expect(response.header("Content-Type")?.hasPrefix("text/event-stream") == true, "\(path)")
            #expect(response.header("Transfer-Encoding") == nil, "\(path)")
            #expect(connection.isClosed(within: 5), "\(path)")
            #expect(connection.unreadByteCount == 0, "\(path): bytes after the headers")
        }
        try Self.waitForMetric(server, "changeserver_streams_open", 0)
        #expect(try server.client.get("/healthz").status == 200)
    }

    @Test func heartbeatEveryFifteenSeconds() throws {
        let server = try ServerProcess()
        let first = try Self.collection(server)
        let stream = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes?since=\(first)", receiveTimeout: 25)
        let opening = try #require(try stream.next())
        #expect(opening.isComment)
        let started = Date()
        let heartbeat = try #require(try stream.next())
        let waited = Date().timeIntervalSince(started)
        #expect(heartbeat.isComment)
        #expect(waited > 5 && waited < 16.5, "heartbeat after \(waited) s")
    }

    @Test func aSlowReaderIsCutOffAndResumes() throws {
        let server = try ServerProcess()
        let first = try Self.collection(server)
        let slow = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(first)")
        try Self.waitForMetric(server, "changeserver_streams_open", 1)
        // 64 events of 512 KiB: far more than the socket buffers and the server's bound of 1 MiB together.
        let big = String(repeating: "x", count: 512 * 1024)
        var last = first
        for index in 0..<64 {
            last = try Self.insert(server, "big\(index)", data: big)
            if try server.metric("changeserver_streams_cut_total") == 1 { break }
        }
        try Self.waitForMetric(server, "changeserver_streams_cut_total", 1)
        try Self.waitForMetric(server, "changeserver_streams_open", 0)
        var lastID = first
        var cut = false
        do {
            while let event = try slow.nextEvent() { lastID = event.id ?? lastID }
        } catch EventStreamReader.Failure.cut {
            cut = true
        }
        #expect(cut, "the stream was closed without its last chunk")
        #expect(lastID != last, "the slow reader did not get every event before it was cut")
        let resumed = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes", headers: ["Last-Event-ID": lastID])
        let caughtUp = try #require(try resumed.nextEvent())
        #expect(caughtUp.object["from"] as? String == lastID && caughtUp.id == last)
    }

    /// Events are written to a waiting stream's socket directly; what a lagging reader's socket does not take waits
    /// in the server, in order, and a stream that ends meanwhile ends only after it: the reader gets every event,
    /// then `gone`, then the body's last chunk.
    @Test func aStreamThatEndsWhileItsReaderLagsStillDeliversEverythingInOrder() throws {
        let server = try ServerProcess()
        var (lagging, versions) = try Self.streamWithAFullSocket(server)
        // Four more: those wait in the server, well under its bound of 1 MiB.
        for _ in 0..<4 { versions.append(try Self.insert(server, "e\(versions.count)", data: Self.bigData)) }
        #expect(try server.client.request("DELETE", "/v1/collections/c").status == 204)
        var received: [String] = []
        while let event = try lagging.nextEvent() {
            if event.name == "changes" { received.append(event.id ?? "") }
            if event.name == "gone" { break }
        }
        #expect(received == versions)
        #expect(try lagging.nextEvent() == nil && lagging.ended)
        #expect(try server.metric("changeserver_streams_cut_total") == 0)
    }

    /// A stream whose client stopped reading holds bytes in the server past libmicrohttpd; stopping the server cuts
    /// it within the grace period (libmicrohttpd aborts when stopped with a connection still suspended).
    @Test func theServerStopsCleanlyWithAStreamWhoseReaderStopped() throws {
        let server = try ServerProcess()
        let (stalled, _) = try Self.streamWithAFullSocket(server)
        for index in 0..<4 { _ = try Self.insert(server, "more\(index)", data: Self.bigData) }
        // The client stays connected, reading nothing, until the server has stopped.
        withExtendedLifetime(stalled) { #expect(server.stop() == 0) }
    }

    @Test func shutdownEndsStreamsCleanly() throws {
        let server = try ServerProcess()
        let first = try Self.collection(server)
        let streams = try (0..<3).map { _ in
            try EventStreamReader(port: server.port, path: "/v1/collections/c/changes?since=\(first)")
        }
        try Self.waitForMetric(server, "changeserver_streams_open", 3)
        #expect(server.stop() == 0)
        for stream in streams {
            while try stream.next() != nil {}
            #expect(stream.ended)
        }
    }
}
