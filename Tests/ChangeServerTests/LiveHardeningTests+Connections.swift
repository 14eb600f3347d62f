import Foundation
import ProcessSupport
import Testing

/// Connections and descriptors: clients that vanish or half-close, limits, a log nobody reads, memory kept.
extension LiveHardeningTests {
    /// stderr is a pipe nobody reads: the event loops go on serving, snapshots (which log) go on compacting the
    /// journal, the lines that did not fit are counted, and a stop still ends the process (it waited for the log's
    /// writer for good, and a second signal's line blocked too, so only SIGKILL ended it).
    @Test func aStderrNobodyReadsDoesNotFreezeTheServer() throws {
        let probe = try ServerProcess()
        let port = probe.port
        probe.stop()
        let process = Process()
        process.executableURL = ServerProcess.binary
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        process.arguments = [
            "--host", "127.0.0.1", "--port", String(port), "--fsync", "never", "--data-dir", directory,
            "--snapshot-bytes", "8192",
        ]
        // The pipe stays open, its read end unread, for as long as `process` holds it as its standard error.
        try Spawning.run(process) {
            process.standardError = Pipe()
            process.standardOutput = FileHandle.nullDevice
        }
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        var connection: HTTPConnection?
        let deadline = Date().addingTimeInterval(10)
        while connection == nil && Date() < deadline {
            connection = try? HTTPConnection(port: port, receiveTimeout: 5)
            if connection == nil { usleep(50_000) }
        }
        let client = try #require(connection)
        var answered = 0
        for _ in 0..<8000 {
            client.sendRequest("GET", "/healthz")
            guard (try? client.readResponse())?.status == 200 else { break }
            answered += 1
        }
        #expect(answered == 8000)
        let data = String(repeating: "x", count: 1000)
        var written = 0
        for index in 0..<100 {
            client.sendRequest(
                "PUT", "/v1/collections/c", headers: ["Content-Type": "application/json"],
                body: Array(#"{"sections": [{"id": "s", "data": "\#(data)\#(index)"}]}"#.utf8))
            if let status = try? client.readResponse().status, status == 200 || status == 201 { written += 1 }
        }
        #expect(written == 100)
        func metric(_ name: String) throws -> Int {
            client.sendRequest("GET", "/metrics")
            let line = try client.readResponse().text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
        }
        // A snapshot starts on a commit past --snapshot-bytes once the one before is done: a few more writes let
        // the last one start even if the machine is slow, and none would if a snapshot hung on stderr.
        let compacted = Date().addingTimeInterval(10)
        while try metric("changeserver_journal_bytes") > 16384 && Date() < compacted {
            client.sendRequest(
                "PUT", "/v1/collections/c", headers: ["Content-Type": "application/json"],
                body: Array(#"{"sections": [{"id": "s", "data": "\#(data)"}]}"#.utf8))
            _ = try client.readResponse()
            usleep(100_000)
        }
        #expect(try metric("changeserver_journal_bytes") <= 16384)
        #expect(try metric("changeserver_log_lines_dropped_total") > 0)
        let stopped = Date()
        kill(process.processIdentifier, SIGTERM)
        #expect(waitUntil(timeout: 20) { !process.isRunning }, "the stop waited for the log")
        #expect(Date().timeIntervalSince(stopped) < 15)
        if !process.isRunning { #expect(process.terminationStatus == 0) }
    }

    /// Polls whose clients vanished give their descriptors back at once; limits stay under the open-files limit.
    @Test func vanishedPollsDoNotExhaustTheDescriptors() throws {
        let server = try ServerProcess(["--threads", "1"], launcher: ["/usr/bin/prlimit", "--nofile=512:512", "--"])
        #expect(server.log.contains("at most 444 connections"))
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        for _ in 0..<3 {
            var polls: [HTTPConnection] = []
            for _ in 0..<400 {
                let poll = try HTTPConnection(port: server.port)
                poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=120")
                polls.append(poll)
            }
            let deadline = Date().addingTimeInterval(20)
            while try server.metric("changeserver_held_polls") != 400 && Date() < deadline { usleep(50_000) }
            #expect(try server.metric("changeserver_held_polls") == 400)
            for poll in polls { poll.close() }
            let released = Date().addingTimeInterval(20)
            while try server.metric("changeserver_held_polls") != 0 && Date() < released { usleep(50_000) }
            #expect(try server.metric("changeserver_held_polls") == 0)
        }
        #expect(try server.client.get("/healthz").status == 200)
        #expect(try server.client.put("/v1/collections/d", ["sections": []]).status == 201)
        // Request lines reach the log within the writer's collecting interval.
        #expect(waitUntil(timeout: 10) { server.log.contains(" 499 ") })
    }

    /// A held poll whose client half-closes (shuts down its sending side) looks like one whose client left: it is
    /// let go and its connection closed without an answer, as nginx closes one. A `499` status line, which no
    /// contract names, once went on the wire.
    @Test func aHalfClosedPollIsClosedWithoutAnAnswer() throws {
        let server = try ServerProcess()
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let poll = try HTTPConnection(port: server.port)
        poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=60")
        #expect(waitUntil(timeout: 10) { (try? server.metric("changeserver_held_polls")) == 1 })
        poll.shutdownWriting()
        #expect(poll.isClosed(within: 10), "closed with nothing sent")
        #expect(waitUntil(timeout: 10) { (try? server.metric("changeserver_held_polls")) == 0 })
        #expect(waitUntil(timeout: 10) { server.log.contains(" 499 ") })
    }

    /// `--idle-timeout` is libmicrohttpd's: a keep-alive connection with no activity that long is closed without a
    /// word, so that one behind a load balancer that keeps its idle connections longer can be kept longer still.
    /// Headers that stop coming still get their `408` first. A quiet event stream is not closed: its heartbeats,
    /// every 15 s, are activity (the option's least is 20).
    @Test func idleConnectionsCloseAfterTheIdleTimeoutAndQuietStreamsStay() throws {
        let server = try ServerProcess(["--idle-timeout", "20"])
        #expect(try server.client.put("/v1/collections/c", ["sections": []]).status == 201)
        let streamOpened = Date()
        let stream = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes", receiveTimeout: 30)
        #expect(try stream.nextEvent()?.name == "reset")
        let idle = try HTTPConnection(port: server.port)
        idle.sendRequest("GET", "/healthz")
        #expect(try idle.readResponse().status == 200)
        // Headers that stop coming get their `408` (at the default of 18 s here) before the idle close: at the idle
        // timeout itself, the close came first.
        let stalled = try HTTPConnection(port: server.port, receiveTimeout: 30)
        stalled.send(Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8))
        let started = Date()
        #expect(!idle.isClosed(within: 15), "closed before the idle timeout")
        #expect(idle.isClosed(within: 25), "still open 40 s after its last request")
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 19 && elapsed < 35, "closed after \(elapsed) s")
        let refused = try stalled.readResponse()
        #expect(refused.status == 408 && refused.errorCode == "request_timeout", "\(refused.status)")
        var heartbeats = 0
        while heartbeats < 2, let event = try stream.next() {
            if event.isComment { heartbeats += 1 }
        }
        let open = Date().timeIntervalSince(streamOpened)
        #expect(open > 25, "two heartbeats came \(open) s after the stream opened")
        #expect(try server.client.put("/v1/collections/c/items/a", ["data": 1]).status == 201)
        #expect(try stream.nextEvent()?.name == "changes", "the stream is still live")
    }

    /// A loop at its share of `--max-connections` accepts no more: new clients wait in the backlog, and nothing
    /// said so (a connection that hangs, a `/healthz` that times out). The open connections are a gauge, reaching
    /// the limit is counted, and logged once a minute.
    @Test func reachingTheConnectionLimitIsCountedAndLogged() throws {
        let server = try ServerProcess(["--max-connections", "5", "--threads", "1"])
        func value(_ name: String) throws -> Int? {
            let text = try server.client.get("/metrics").text
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        #expect(try value("changeserver_connections_open") == 1, "the scrape's own")
        #expect(try value("changeserver_connection_limit_reached_total") == 0)
        var idle = try (0..<4).map { _ in try HTTPConnection(port: server.port) }
        #expect(waitUntil(timeout: 10) { (try? value("changeserver_connections_open")) == 5 })
        #expect(try value("changeserver_connection_limit_reached_total") ?? 0 >= 1)
        #expect(waitUntil(timeout: 10) { server.log.contains("holds its share of --max-connections open (5)") })
        // Every scrape at four idle connections reaches the limit again: counted each time, logged once a minute.
        #expect(try value("changeserver_connection_limit_reached_total") ?? 0 >= 2)
        #expect(server.log.components(separatedBy: "holds its share of --max-connections").count == 2)
        for connection in idle { connection.close() }
        idle.removeAll()
        #expect(waitUntil(timeout: 10) { (try? value("changeserver_connections_open")) == 1 })
    }

    @Test func connectionsPerAddressAreLimited() throws {
        let server = try ServerProcess(["--threads", "1", "--max-connections-per-address", "3"])
        let kept = try (0..<3).map { _ in try HTTPConnection(port: server.port) }
        for connection in kept {
            connection.sendRequest("GET", "/healthz")
            #expect(try connection.readResponse().status == 200)
        }
        let fourth = try HTTPConnection(port: server.port, receiveTimeout: 2)
        fourth.sendRequest("GET", "/healthz")
        #expect((try? fourth.readResponse()) == nil)
        // Once the server has seen the close (a loaded machine may take a while), a new connection is served.
        kept[0].close()
        let servedAgain = waitUntil(timeout: 20) {
            guard let again = try? HTTPConnection(port: server.port, receiveTimeout: 2) else { return false }
            again.sendRequest("GET", "/healthz")
            return (try? again.readResponse())?.status == 200
        }
        #expect(servedAgain)
    }

    /// Reads of a snapshot keep no memory once answered: a snapshot over the cache's 1 MiB is encoded for every
    /// read, and each such answer (ours and libmicrohttpd's copy of it) was kept for good, a reference cycle
    /// between a shared response and its mark: 40 reads of a 3.5 MB snapshot took about 280 MB more. Smaller
    /// snapshots leaked once per version read, and their `304`s too.
    @Test func snapshotReadsKeepNoMemory() throws {
        let server = try ServerProcess()
        let client = Client(port: server.port, receiveTimeout: 120)
        let items = (0..<40_000).map { ["id": "item-\($0)", "data": ["text": String(repeating: "x", count: 60)]] }
        let created = try client.put("/v1/collections/big", ["sections": [["id": "s", "items": items]]])
        #expect(created.status == 201)
        let version = try #require(created.object["version"] as? String)
        let first = try client.get("/v1/collections/big")
        #expect(first.status == 200 && first.body.count > 3_000_000, "\(first.body.count) bytes")
        for _ in 0..<4 { _ = try client.get("/v1/collections/big") }
        let before = memory(server, "VmRSS")
        for _ in 0..<40 {
            #expect(try client.get("/v1/collections/big").status == 200)
            let notModified = try client.get("/v1/collections/big", headers: ["If-None-Match": "\"\(version)\""])
            #expect(notModified.status == 304)
        }
        let grown = memory(server, "VmRSS") - before
        #expect(grown < 60 * 1024, "resident memory grew by \(grown) KiB over 40 reads of \(first.body.count) bytes")
    }

    /// Streams whose clients read nothing share a large event rather than hold a copy each: what a socket did not
    /// take was copied per stream, on the loop (300 such streams held 1.5 GB of one 5 MB changeset, and the loop
    /// answered nothing for 1.6 s while it copied).
    @Test func streamsThatReadNothingShareALargeEvent() throws {
        let server = try ServerProcess()
        let created = try server.client.put("/v1/collections/big", ["sections": [["id": "s"]]])
        let version = try #require(created.object["version"] as? String)
        let streams = try (0..<60).map { _ in
            try EventStreamReader(
                port: server.port, path: "/v1/collections/big/changes?since=\(version)", receiveBuffer: 4096)
        }
        let deadline = Date().addingTimeInterval(20)
        while try server.metric("changeserver_streams_open") != streams.count, Date() < deadline { usleep(10_000) }
        #expect(try server.metric("changeserver_streams_open") == streams.count)
        let before = memory(server, "VmRSS")
        let items = (0..<16_000).map { ["id": "item-\($0)", "data": ["text": String(repeating: "x", count: 240)]] }
        #expect(
            try server.client.put("/v1/collections/big", ["sections": [["id": "s", "items": items]]]).status == 200)
        // Each stream's event is written once its server-side socket holds bytes it has not sent.
        let ports = streams.map(\.connection.localPort)
        func written() -> Bool {
            ports.allSatisfy { (LoopbackTCP.sendQueue(serverPort: server.port, clientPort: $0) ?? 0) > 0 }
        }
        while !written(), Date() < deadline { usleep(10_000) }
        #expect(written())
        let grown = memory(server, "VmRSS") - before
        #expect(grown < 50 * 1024, "resident memory grew by \(grown) KiB with 60 streams of a 4.5 MB event")
        #expect(try server.client.get("/healthz").status == 200)
        withExtendedLifetime(streams) {}
    }

    /// Streams whose clients read nothing share small events too, written to the socket many at a time: each
    /// stream joined the small events its socket did not take into a copy of its own, so 1,000 streams that read
    /// nothing held 1.1 GB of 2 KB events, 1 MiB each until they were cut, and no budget bounded them all. Events
    /// a lagging reader takes later still come whole and in order.
    @Test func streamsThatReadNothingShareSmallEvents() throws {
        let server = try ServerProcess()
        let created = try server.client.put("/v1/collections/c", ["sections": [["id": "s", "items": [["id": "a"]]]]])
        let version = try #require(created.object["version"] as? String)
        let streams = try (0..<60).map { _ in
            try EventStreamReader(
                port: server.port, path: "/v1/collections/c/changes?since=\(version)", receiveTimeout: 60,
                receiveBuffer: 2048)
        }
        #expect(try awaitMetric(server, "changeserver_streams_open", streams.count))
        let ports = streams.map(\.connection.localPort)
        func queued() -> [Int] {
            ports.map { LoopbackTCP.sendQueue(serverPort: server.port, clientPort: $0) ?? 0 }
        }
        // Events of 8 KB until every stream's socket is full (its queue no longer grows), at most 2,000.
        let text = String(repeating: "x", count: 8000)
        var versions: [String] = []
        func write() throws {
            let answer = try server.client.put("/v1/collections/c/items/a", ["data": ["n": versions.count, "t": text]])
            versions.append(try #require(answer.object["version"] as? String))
        }
        var before = queued()
        while versions.count < 2000 {
            for _ in 0..<20 { try write() }
            let now = queued()
            if now == before && now.allSatisfy({ $0 > 0 }) { break }
            before = now
        }
        let resident = memory(server, "VmRSS")
        // 512 KB more for each stream, which it holds in the server: within its 1 MiB, so none is cut.
        for _ in 0..<64 { try write() }
        let grown = memory(server, "VmRSS") - resident
        #expect(try server.metric("changeserver_streams_cut_total") == 0)
        #expect(grown < 16 * 1024, "resident memory grew by \(grown) KiB with 60 streams 512 KB behind")
        // The first stream's reader catches up: each event follows the one before (a lagging stream's may join
        // several changesets) and holds the data of the version it ends at.
        var at = version
        while at != versions.last, let event = try streams[0].nextEvent() {
            guard event.name == "changes" else { continue }
            #expect(event.object["from"] as? String == at)
            at = event.id ?? ""
            let written = try #require(versions.firstIndex(of: at))
            let whole = event.data.contains(#""n":\#(written),"#) && event.data.hasSuffix("}")
            #expect(whole, "the event to \(at) came whole")
        }
        #expect(at == versions.last)
        withExtendedLifetime(streams) {}
    }

    /// Event streams opened without a version start with the snapshot (`event: reset`), made once, off the event
    /// loop, and shared by the streams that have not sent it yet: each stream encoded and held its own, on the loop
    /// (20 streams of a 16 MB snapshot that read nothing held 467 MB, and `/healthz` waited 1.6 s). A stream opened
    /// so is followed from the reset's version: the next change reaches it, even before its client took the reset.
    @Test func streamsOpenedWithoutAVersionShareOneSnapshot() throws {
        let server = try ServerProcess(["--threads", "2"])
        let length = try collectionOfFiveMegabytes(server)
        let before = memory(server, "VmRSS")
        let streams = try (0..<60).map { _ in
            try EventStreamReader(
                port: server.port, path: "/v1/collections/big/changes", receiveTimeout: 60, receiveBuffer: 4096)
        }
        #expect(try awaitMetric(server, "changeserver_streams_open", streams.count))
        #expect(awaitAnswered(server, streams.map(\.connection)))
        let grown = memory(server, "VmRSS") - before
        #expect(grown < 50 * 1024, "resident memory grew by \(grown) KiB with 60 unread streams of \(length) bytes")
        let snapshot = try server.client.get("/v1/collections/big")
        // A change while the snapshot is still unread: the first event is not held against the 1 MiB a reader
        // may fall behind (every stream was cut, and its client, without the snapshot's id, started over).
        #expect(try server.client.put("/v1/collections/big/items/item-1", ["data": 1]).status == 200)
        #expect(
            try waitUntil(timeout: 20) {
                try server.metric("changeserver_changesets_delivered_total") ?? 0 >= streams.count
            })
        #expect(try server.metric("changeserver_streams_cut_total") == 0)
        let reset = try #require(try streams[0].nextEvent())
        #expect(reset.name == "reset" && reset.id == snapshot.header("ETag")?.trimmingCharacters(in: ["\""]))
        #expect(reset.data.hasSuffix(#""snapshot":"# + snapshot.text + "}"))
        let changes = try #require(try streams[0].nextEvent())
        #expect(changes.name == "changes" && (changes.object["from"] as? String) == reset.id, "\(changes.data)")
        withExtendedLifetime(streams) {}
    }

    /// A collection whose snapshot is about 5 MB, too large to be kept encoded; the snapshot's length.
    private func collectionOfFiveMegabytes(_ server: ServerProcess) throws -> Int {
        let client = Client(port: server.port, receiveTimeout: 120)
        let items = (0..<20_000).map { ["id": "item-\($0)", "data": ["text": String(repeating: "x", count: 240)]] }
        #expect(try client.put("/v1/collections/big", ["sections": [["id": "s", "items": items]]]).status == 201)
        return try client.get("/v1/collections/big").body.count
    }

    /// Waits until the server's side of each connection holds bytes its client has not taken: its answer is out.
    private func awaitAnswered(_ server: ServerProcess, _ connections: [HTTPConnection]) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        func answered() -> Bool {
            connections.allSatisfy {
                (LoopbackTCP.sendQueue(serverPort: server.port, clientPort: $0.localPort) ?? 0) > 0
            }
        }
        while !answered(), Date() < deadline { usleep(10_000) }
        return answered()
    }

    private func awaitMetric(_ server: ServerProcess, _ name: String, _ value: Int) throws -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while try server.metric(name) != value, Date() < deadline { usleep(10_000) }
        return try server.metric(name) == value
    }

    /// A snapshot too large to be kept encoded is sent from memory counted against `--max-response-memory`, and
    /// the reads of its version share it while any of them is being sent: each read held a copy of its own until
    /// its client took it, or for libmicrohttpd's 120 s when it took nothing (300 connections that asked for a
    /// 5 MB snapshot and read nothing held 1.5 GB). The first reads on each of the two loops may each encode one.
    @Test func unreadSnapshotsShareOneCopyPerLoop() throws {
        let server = try ServerProcess(["--threads", "2"])
        let length = try collectionOfFiveMegabytes(server)
        #expect(length > 4_000_000)
        let before = memory(server, "VmRSS")
        let readers = try (0..<60).map { _ in try HTTPConnection(port: server.port, receiveBuffer: 4096) }
        for reader in readers { reader.sendRequest("GET", "/v1/collections/big") }
        #expect(awaitAnswered(server, readers))
        let grown = memory(server, "VmRSS") - before
        #expect(grown < 40 * 1024, "resident memory grew by \(grown) KiB for 60 unread reads of \(length) bytes")
        let held = try #require(try server.metric("changeserver_response_bytes_held"))
        #expect(held >= length && held <= 2 * length && held % length == 0, "\(held) bytes held for \(length)")
        for reader in readers { reader.close() }
        #expect(try awaitMetric(server, "changeserver_response_bytes_held", 0))
    }

    /// Large answers not taken by their clients hold at most `--max-response-memory`: past it a read gets
    /// `503 server_busy` with `Retry-After`, and reads go again once the clients have gone. One answer larger than
    /// the whole budget still goes, by itself.
    @Test func largeAnswersBeyondTheirBudgetAre503UntilClientsTakeThem() throws {
        let server = try ServerProcess(["--max-response-memory", "4000000"])
        let length = try collectionOfFiveMegabytes(server)
        // A reset answer, larger than the budget, goes alone.
        let stalled = try HTTPConnection(port: server.port, receiveBuffer: 4096)
        stalled.sendRequest("GET", "/v1/collections/big/changes")
        #expect(awaitAnswered(server, [stalled]))
        let held = try server.metric("changeserver_response_bytes_held") ?? 0
        #expect(held > length)
        let client = Client(port: server.port, receiveTimeout: 120)
        // The same reset shares its bytes while they are being sent: it takes nothing more.
        let shared = try client.get("/v1/collections/big/changes")
        #expect(shared.status == 200 && shared.body.count == held, "\(shared.status), \(shared.body.count) bytes")
        #expect(try server.metric("changeserver_response_bytes_held") == held)
        // A reset for another timeout (its `next` differs) and the snapshot need bytes of their own.
        for path in ["/v1/collections/big/changes?timeout=7", "/v1/collections/big"] {
            let refused = try client.get(path)
            #expect(refused.status == 503 && refused.errorCode == "server_busy", "\(path): \(refused.status)")
            #expect(refused.header("Retry-After") == "1")
            #expect(refused.text.contains("--max-response-memory"), "\(refused.text)")
        }
        #expect(try client.get("/v1/collections/big/items/item-7").status == 200)
        // A write's answer is never refused for memory: it may report a change made already (a replacement's
        // changeset here, over 1 MiB; it got a bare 500 for a write that took effect).
        let items = (0..<20_000).map { ["id": "item-\($0)", "data": ["text": String(repeating: "y", count: 240)]] }
        let replaced = try client.put("/v1/collections/big", ["sections": [["id": "s", "items": items]]])
        #expect(replaced.status == 200 && replaced.body.count > 1 << 20, "\(replaced.status)")
        stalled.close()
        #expect(try awaitMetric(server, "changeserver_response_bytes_held", 0))
        let read = try client.get("/v1/collections/big")
        #expect(read.status == 200 && read.body.count == length)
        #expect(try client.get("/v1/collections/big/changes").status == 200)
    }
}
