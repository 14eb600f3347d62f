import Foundation
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

@Suite(.tags(.liveServer)) struct LiveLifecycleTests {
    /// Starts `executable` with `arguments` and the environment's own `CHANGESERVER_` variables left out, its stderr
    /// in `folder`: for the starts `ServerProcess` does not make (one that never listens, one through a shell).
    /// Returns the process and a reader of its log.
    private func startLogged(_ executable: URL, _ arguments: [String], in folder: String) throws -> (
        Process, () -> String
    ) {
        let logPath = folder + "/stderr.log"
        try #require(FileManager.default.createFile(atPath: logPath, contents: nil))
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CHANGESERVER_") }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        do {
            defer { try? log.close() }
            try Spawning.run(process)
        }
        return (process, { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" })
    }

    /// Writers on keep-alive connections and on new ones while the server stops: every request sent is answered
    /// (`2xx`, or `503 shutting_down` with `Connection: close`) or its connection is refused before it is sent.
    /// A connection closed as its client's next request came, or one in the listener's backlog when the listener
    /// closed, took requests without a word (16 to 20 of 32 writers' in each of a soak test's runs). So did, in 7
    /// runs of 100, a new connection that came between the backlog's last accept and the listener's close (reset,
    /// before or after its request went), until the listener dropped new connections first.
    ///
    /// One close stays allowed, as HTTP/1.1 allows it (RFC 9112, 9.3.1: the client retries on a new connection):
    /// that of a connection the server had seen idle for the loop's whole quiet time (`HTTPServer.stopQuiet`),
    /// counted by the kernel from the last answer's arrival (`TCPInfo`), not from its read: a writer descheduled
    /// between the two (once in about 30 runs on a busy machine) sent its request as the connection closed, and
    /// measured from the read, it looked like the closes this test was written for.
    @Test func everyRequestSentWhileStoppingIsAnswered() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let outcomes = Mutex<[String: Int]>([:])
        let written = Atomic<Int>(0)
        let writers = (0..<8).map { writer in
            JoinableThread {
                var connection = try? HTTPConnection(port: server.port)
                // What came before the request: its connection's making, or an answer on it.
                var before = "a new connection"
                for index in 0..<5000 {
                    guard let open = connection else {
                        outcomes.withLock { $0["refused", default: 0] += 1 }
                        return
                    }
                    let body = Array(#"{"data": 1}"#.utf8)
                    // Read before the request goes: read after, a writer descheduled in between would count that
                    // time as idle, and could pass a close that came as its request did.
                    let idle = TCPInfo.millisecondsSinceDataArrived(on: open.descriptor) ?? 0
                    open.sendRequest(
                        "PUT", "/v1/collections/c/items/w\(writer)-\(index)",
                        headers: ["Content-Type": "application/json"], body: body)
                    let answer: HTTPResponse
                    do {
                        answer = try open.readResponse()
                    } catch ClientError.closedEarly(let received)
                        where idle >= HTTPServer.stopQuiet
                        && (received.isEmpty || received == "recv errno \(ECONNRESET)")
                    {
                        outcomes.withLock { $0["closed after \(idle) ms idle", default: 0] += 1 }
                        open.close()
                        connection = try? HTTPConnection(port: server.port)
                        before = "a new connection"
                        continue
                    } catch {
                        outcomes.withLock {
                            $0["unanswered after \(idle) ms idle, after \(before): \(error)", default: 0] += 1
                        }
                        return
                    }
                    written.add(1, ordering: .relaxed)
                    let closes = answer.header("Connection") == "close"
                    before = "\(answer.status)\(closes ? " close" : "")"
                    outcomes.withLock { $0[before, default: 0] += 1 }
                    if closes {
                        open.close()
                        // A new connection: refused once the listener is closed.
                        connection = try? HTTPConnection(port: server.port)
                        before = "a new connection"
                    }
                }
            }
        }
        #expect(waitUntil(timeout: 20) { written.load(ordering: .relaxed) >= 400 })
        kill(server.process.processIdentifier, SIGTERM)
        for writer in writers { writer.join() }
        #expect(server.waitForExit(timeout: 10) == 0)
        let seen = outcomes.withLock { $0 }
        let closedIdle = Set(seen.keys.filter { $0.hasPrefix("closed after") })
        #expect(
            Set(seen.keys).subtracting(closedIdle).isSubset(of: ["201", "201 close", "503 close", "refused"]),
            "\(seen)")
        #expect(seen["refused"] == 8, "every writer ends refused: \(seen)")
    }

    /// A keep-alive connection idle as the stop begins is not closed under its client's next request: its loop
    /// waits `HTTPServer.stopQuiet` for one, answered `503` with `Connection: close`. Without that wait the loop
    /// ended as soon as no request was in flight, and the request met a closing connection (what the writers above
    /// rarely hit). A client descheduled for the whole quiet time may meet it still, as HTTP/1.1 allows.
    @Test func aRequestOnAnIdleConnectionAsTheStopBeginsIsAnswered() throws {
        let server = try ServerProcess(["--threads", "1"])
        let connection = try HTTPConnection(port: server.port)
        connection.sendRequest("GET", "/healthz")
        #expect(try connection.readResponse().status == 200)
        kill(server.process.processIdentifier, SIGTERM)
        #expect(waitUntil(timeout: 10) { server.log.contains("shutting down") })
        var answers: [String] = []
        // Answered as before until the loop has begun its stop, a moment after the log line.
        while answers.last == nil || answers.last == "200", answers.count < 100 {
            let idle = TCPInfo.millisecondsSinceDataArrived(on: connection.descriptor) ?? 0
            connection.sendRequest("GET", "/healthz")
            do {
                let answer = try connection.readResponse()
                answers.append("\(answer.status)\(answer.header("Connection") == "close" ? " close" : "")")
            } catch ClientError.closedEarly where idle >= HTTPServer.stopQuiet {
                answers.append("closed after \(idle) ms idle")
            }
        }
        #expect(answers.last == "503 close" || answers.last?.hasPrefix("closed after") == true, "\(answers)")
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    /// While the server stops, every request but a preflight is `503 shutting_down` with `Connection: close`,
    /// whatever its route (a `404` or `405` kept its connection open for the next request). An upload still to come
    /// keeps the one event loop in its stop.
    @Test func requestsDuringAStopAre503WhateverTheirRoute() throws {
        let server = try ServerProcess(["--threads", "1"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let (kept, upload) = try Self.stopHeldOpenByAnUpload(server, keeping: 3)
        defer { upload.close() }
        for (connection, (method, path)) in zip(
            kept, [("GET", "/v2/nothing"), ("POST", "/healthz"), ("GET", "/healthz")])
        {
            connection.sendRequest(method, path)
            let answer = try connection.readResponse()
            #expect(answer.status == 503 && answer.errorCode == "shutting_down", "\(method) \(path): \(answer.status)")
            #expect(answer.header("Connection") == "close", "\(method) \(path)")
        }
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    /// So are requests whose headers leave no room for that answer in the connection's memory: their `431`, through
    /// libmicrohttpd or written on the socket, says `Connection: close` too, and the connection closes (through
    /// libmicrohttpd it went without, and the client's next request on it waited for an answer that never came).
    @Test func fallbackAnswersDuringAStopCloseTheirConnections() throws {
        let server = try ServerProcess(["--threads", "1", "--connection-memory", "2560"])
        // Every byte where the `431` still fits through libmicrohttpd with `Connection: close` (2,127 to 2,130
        // bytes of padding as a review measured it: without the header, about 21 bytes of it did), and around.
        let sizes = Array(stride(from: 1800, to: 2100, by: 20)) + Array(2100...2180) + [2300, 2500]
        let (kept, upload) = try Self.stopHeldOpenByAnUpload(server, keeping: sizes.count)
        defer { upload.close() }
        var statuses: [Int: Int] = [:]
        for (connection, size) in zip(kept, sizes) {
            connection.sendRequest("GET", "/healthz", headers: ["X-Padding": String(repeating: "p", count: size)])
            let answer = try connection.readResponse()
            statuses[answer.status, default: 0] += 1
            #expect([431, 503].contains(answer.status), "\(size): \(answer.status)")
            #expect(answer.header("Connection") == "close", "\(size): \(answer.status)")
            #expect(connection.isClosed(within: 5), "\(size)")
        }
        #expect(statuses[431, default: 0] > 0 && statuses[503, default: 0] > 0, "\(statuses)")
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    /// Opens `count` connections that each had an answer, then stops the server (`SIGTERM`) while an upload is
    /// still to come, which keeps its one event loop in the stop: returns the connections and the upload's.
    private static func stopHeldOpenByAnUpload(
        _ server: ServerProcess, keeping count: Int
    ) throws -> (kept: [HTTPConnection], upload: HTTPConnection) {
        let kept = try (0..<count).map { _ in try HTTPConnection(port: server.port) }
        for connection in kept {
            connection.sendRequest("GET", "/healthz")
            #expect(try connection.readResponse().status == 200)
        }
        let upload = try HTTPConnection(port: server.port)
        upload.send(
            Array(
                ("PUT /v1/collections/c/items/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 100\r\n\r\n{").utf8))
        #expect(waitUntil(timeout: 10) { (try? server.metric("changeserver_body_bytes_in_flight")) == 1 })
        kill(server.process.processIdentifier, SIGTERM)
        #expect(waitUntil(timeout: 10) { server.log.contains("shutting down") })
        return (kept, upload)
    }

    /// A write answered after the stop began closes its connection (`Connection: close`): its keep-alive client
    /// sent its next request on it, and one that came after the loop's last 200 ms without a request went
    /// unanswered and unlogged (7 to 65 writes in an operator's runs, where thousands of streams made stops longer).
    @Test func writesAnsweredDuringAStopCloseTheirConnections() throws {
        let server = try ServerProcess(["--threads", "1"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [] as [Any]]).status == 201)
        // Replacements of 20,000 items ahead of the write on the collection's lane, so that it is still waiting
        // when the stop comes.
        let sections = (0..<20).map { section in
            ["id": "s\(section)", "items": (0..<1000).map { ["id": "i\(section)-\($0)", "data": 1] }] as [String: Any]
        }
        let body = Array(try JSONSerialization.data(withJSONObject: ["sections": sections]))
        let port = server.port
        let replacements = (0..<3).map { _ in
            JoinableThread {
                _ = try? Client(port: port, receiveTimeout: 30).request(
                    "PUT", "/v1/collections/c", headers: ["Content-Type": "application/json"], body: body)
            }
        }
        #expect(waitUntil(timeout: 10) { (try? server.metric("changeserver_mutations_total")) ?? 0 >= 2 })
        let writer = try HTTPConnection(port: server.port, receiveTimeout: 30)
        writer.sendRequest(
            "PUT", "/v1/collections/c/items/late", headers: ["Content-Type": "application/json"],
            body: Array(#"{"data": 1}"#.utf8))
        #expect(!writer.isReadable(within: 0.05), "answered before the stop: nothing was tested")
        kill(server.process.processIdentifier, SIGTERM)
        let answer = try writer.readResponse()
        #expect([201, 503].contains(answer.status), "\(answer.status)")
        #expect(answer.header("Connection") == "close")
        #expect(writer.isClosed(within: 5))
        for replacement in replacements { replacement.join() }
        #expect(server.waitForExit(timeout: 20) == 0)
    }

    @Test func sigtermAnswersHeldPolls503AndExitsZero() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let polls = try (0..<20).map { _ in try HTTPConnection(port: server.port) }
        for poll in polls { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=60") }
        try waitForHeldPolls(server, 20)
        let started = Date()
        kill(server.process.processIdentifier, SIGTERM)
        for poll in polls {
            let response = try poll.readResponse()
            #expect(response.status == 503)
            #expect(response.header("Retry-After") == "1")
            #expect(response.header("Connection") == "close")
            #expect(response.errorCode == "shutting_down")
        }
        let status = server.waitForExit(timeout: 6)
        #expect(status == 0)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(server.log.contains("stopped"))
    }

    /// A hang-up drains as `SIGTERM` does (by default it killed the process at once: held polls unanswered, the
    /// last log lines lost), and a second signal meanwhile exits at once with status 1, saying so.
    @Test func sighupDrainsAndASecondSignalExitsAtOnce() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let poll = try HTTPConnection(port: server.port)
        poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=60")
        try waitForHeldPolls(server, 1)
        kill(server.process.processIdentifier, SIGHUP)
        let answer = try poll.readResponse()
        #expect(answer.status == 503 && answer.errorCode == "shutting_down")
        #expect(server.waitForExit(timeout: 6) == 0)
        #expect(server.log.contains("shutting down") && server.log.contains("stopped"))

        let (stuck, _) = try LiveMutationTests.seeded()
        // A body still to come keeps the stop waiting for its grace period; a second signal cuts that short.
        let upload = try HTTPConnection(port: stuck.port)
        upload.send(
            Array(
                ("PUT /v1/collections/c/items/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 100\r\n\r\n{").utf8))
        // Its head must have been read: a connection whose request has not begun is closed by the stop at once.
        #expect(waitUntil(timeout: 10) { (try? stuck.metric("changeserver_body_bytes_in_flight")) == 1 })
        kill(stuck.process.processIdentifier, SIGTERM)
        #expect(waitUntil(timeout: 10) { stuck.log.contains("shutting down") })
        #expect(!stuck.log.contains("PUT /v1/collections/c/items/x"), "not ended yet")
        kill(stuck.process.processIdentifier, SIGINT)
        #expect(stuck.waitForExit(timeout: 6) == 1)
        #expect(waitUntil(timeout: 5) { stuck.log.contains("a second signal (2): exiting at once, with status 1") })
    }

    /// A server started with hang-ups ignored (`nohup`) keeps them ignored: it was meant to outlive its terminal,
    /// and a blocked signal is kept even when ignored, so taking SIGHUP would have stopped it.
    @Test func aServerStartedUnderNohupIgnoresHangUps() throws {
        let folder = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (process, text) = try startLogged(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c", #"trap "" HUP; exec "$0" "$@""#, ServerProcess.binary.path, "--host", "127.0.0.1", "--port", "0",
                "--data-dir", folder + "/data",
            ], in: folder)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(waitUntil(timeout: 20) { text().contains("listening on") }, "\(text())")
        let port = try #require(
            text().range(of: #"listening on [^ ]+:(\d+)"#, options: .regularExpression).flatMap {
                Int(text()[$0].split(separator: ":").last ?? "")
            })
        kill(process.processIdentifier, SIGHUP)
        usleep(300_000)
        #expect(process.isRunning, "\(text())")
        #expect(try Client(port: port).get("/healthz").status == 200)
        kill(process.processIdentifier, SIGTERM)
        #expect(waitForExit(of: process, timeout: 10))
        #expect(process.terminationStatus == 0)
    }

    /// An upload a stop cuts off is logged `444` (its line, written inside libmicrohttpd's stop after the loop's last
    /// turn, was never handed to the log).
    @Test func anUploadAStopCutsOffIsLogged444() throws {
        let (server, _) = try LiveMutationTests.seeded()
        let upload = try HTTPConnection(port: server.port)
        upload.send(
            Array(
                ("PUT /v1/collections/c/items/big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 100000\r\n\r\n{\"data\": \"" + String(repeating: "x", count: 50_000)).utf8))
        #expect(waitUntil(timeout: 10) { (try? server.metric("changeserver_body_bytes_in_flight")) ?? 0 > 0 })
        kill(server.process.processIdentifier, SIGTERM)
        #expect(server.waitForExit(timeout: 10) == 0)
        #expect(server.log.contains("PUT /v1/collections/c/items/big 444 "), "\(server.log)")
    }

    /// A signal while the server starts (here it waits for a database that refuses connections) ends it at once,
    /// not after its 30 s of retrying: Ctrl-C and `docker stop` work during a start too.
    @Test func aSignalWhileStartingEndsTheServerAtOnce() throws {
        let folder = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (process, text) = try startLogged(
            ServerProcess.binary,
            [
                "--host", "127.0.0.1", "--port", "0", "--postgres", "postgresql://changeserver@127.0.0.1:1/none",
                "--log-level", "info",
            ], in: folder)
        let retrying = waitUntil(timeout: 20) { text().contains("cannot connect to PostgreSQL yet") }
        #expect(retrying, "\(text())")
        let signalled = Date()
        kill(process.processIdentifier, SIGTERM)
        #expect(waitForExit(of: process, timeout: 10))
        #expect(Date().timeIntervalSince(signalled) < 5)
        #expect(process.terminationStatus == 0)
        #expect(text().contains("stopped by a signal before serving"), "\(text())")
    }

    /// Every loop binds with SO_REUSEPORT; a second server on a taken port must refuse to start, not share it.
    @Test func aSecondServerOnATakenPortRefusesToStart() throws {
        let first = try ServerProcess()
        do {
            let second = try ServerProcess(["--port", "\(first.port)"])
            _ = second.stop()
            Issue.record("a second server started on port \(first.port)")
        } catch {
            #expect("\(error)".contains("another process uses that port"), "\(error)")
        }
        #expect(try first.client.get("/healthz").status == 200)
    }

    /// The start checks its port before it opens its store, and listens once it serves: a taken port is reported
    /// at once, not after the replay of a journal or the database's 30 s of patience, and a server that still
    /// starts refuses connections rather than leaving them unanswered.
    @Test func aTakenPortIsReportedBeforeTheStoreOpens() throws {
        let folder = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let unreachable = ["--postgres", "postgresql://changeserver@127.0.0.1:1/none"]
        let taken = try listeningOnLoopback()
        let (refused, refusal) = try startLogged(
            ServerProcess.binary, ["--host", "127.0.0.1", "--port", "\(taken.port)"] + unreachable, in: folder)
        let exited = waitForExit(of: refused, timeout: 15)
        close(taken.descriptor)
        if !exited { kill(refused.processIdentifier, SIGKILL) }
        refused.waitUntilExit()
        #expect(exited, "\(refusal())")
        #expect(refused.terminationStatus == 1)
        #expect(refusal().contains("another process uses that port"), "\(refusal())")
        #expect(!refusal().contains("PostgreSQL"), "\(refusal())")

        let port = try ClosingListener.freePort()
        let (starting, text) = try startLogged(
            ServerProcess.binary, ["--host", "127.0.0.1", "--port", "\(port)"] + unreachable, in: folder)
        defer {
            kill(starting.processIdentifier, SIGKILL)
            starting.waitUntilExit()
        }
        #expect(waitUntil(timeout: 20) { text().contains("cannot connect to PostgreSQL yet") }, "\(text())")
        do {
            _ = try HTTPConnection(port: port)
            Issue.record("a server that still starts took a connection")
        } catch ClientError.connect(let code) {
            #expect(code == ECONNREFUSED)
        }
    }

    /// A value libpq refuses before it connects (`sslmode=bogus`) was tried again for the start's 30 s of patience,
    /// which waiting cannot mend; the start ends at once with libpq's reason. A database that cannot be reached is
    /// still tried again (`aSignalWhileStartingEndsTheServerAtOnce`).
    @Test func aConnectionValueLibpqRefusesEndsTheStartAtOnce() throws {
        let folder = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (process, text) = try startLogged(
            ServerProcess.binary,
            [
                "--host", "127.0.0.1", "--port", "0", "--postgres",
                "postgresql://changeserver@127.0.0.1:1/none?sslmode=bogus",
            ],
            in: folder)
        let exited = waitForExit(of: process, timeout: 15)
        if !exited { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        #expect(exited, "\(text())")
        #expect(process.terminationStatus == 1)
        #expect(text().contains(#"invalid sslmode value: "bogus""#), "\(text())")
        #expect(!text().contains("trying again"), "\(text())")
    }

    @Test func idleKeepAliveConnectionsDoNotDelayTheStop() throws {
        let server = try ServerProcess()
        let idle = try HTTPConnection(port: server.port)
        idle.sendRequest("GET", "/healthz")
        #expect(try idle.readResponse().status == 200)
        let started = Date()
        #expect(server.stop(timeout: 5) == 0)
        // Short of the 2.5 s a stop gives unfinished requests, with room for a loaded machine.
        #expect(Date().timeIntervalSince(started) < 2.4)
    }

    @Test func logsOneLinePerRequestWithoutBodies() throws {
        let server = try ServerProcess()
        _ = try server.client.put("/v1/collections/c", ["sections": [["id": "secret-section-body"]]])
        _ = try server.client.get("/v1/collections/c")
        let logged = waitUntil(timeout: 5) {
            let lines = server.log.split(separator: "\n")
            return lines.contains { $0.contains(" info PUT /v1/collections/c 201 ") }
                && lines.contains { $0.contains(" info GET /v1/collections/c 200 ") }
        }
        #expect(logged, "\(server.log)")
        #expect(!server.log.contains("secret-section-body"))
    }
}
