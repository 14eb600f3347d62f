import Foundation
import ProcessSupport
import Testing

/// Request bodies: refused before they are kept, shared memory, stalls, clients that leave midway.
extension LiveHardeningTests {
    @Test func unauthenticatedUploadsAreRefusedBeforeTheirBodiesAreKept() throws {
        let server = try ServerProcess(["--write-token", "secret"])
        let bodyBytes = 8 << 20
        let piece = [UInt8](repeating: 0x20, count: 1 << 20)
        let before = memory(server, "VmRSS")
        var connections: [HTTPConnection] = []
        for _ in 0..<12 {
            let connection = try HTTPConnection(port: server.port)
            connection.send(
                Array(
                    ("PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        + "Content-Length: \(bodyBytes)\r\n\r\n").utf8))
            for _ in 0..<7 { connection.send(piece) }
            connection.send(Array(piece.dropLast()))
            connections.append(connection)
        }
        usleep(300_000)
        let during = memory(server, "VmRSS")
        var refused = 0
        for connection in connections {
            connection.send([0x20])
            if try connection.readResponse().status == 401 { refused += 1 }
        }
        #expect(refused == 12)
        let waiting = try HTTPConnection(port: server.port)
        waiting.send(
            Array(
                ("PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(bodyBytes)\r\nExpect: 100-continue\r\n\r\n").utf8))
        #expect(try waiting.readResponse().status == 401)
        // 12 bodies of 8 MiB were sent all but their last byte: none of them may be held.
        #expect(during - before < 24 * 1024, "resident memory grew by \(during - before) KiB")
    }

    /// A request with `Expect: 100-continue` and no body, followed in the same packet by more bytes (a CRLF, which
    /// RFC 9112 lets a server skip, or a pipelined request): libmicrohttpd sends `100 Continue`, then calls the
    /// handler with the bytes that follow, none of them the request's, and refused an answer queued in that call.
    /// The request got no answer, and the connection closed.
    @Test func aBodilessRequestWithExpectAndMoreBytesBehindItIsAnswered() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let expecting = " HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n\r\n"
        let next = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        for (request, answers) in [
            ("GET /healthz" + expecting + "\r\n" + next, [100, 200, 200]),
            ("GET /v1/collections/c" + expecting + next, [100, 200, 200]),
            ("GET /v1/collections/missing" + expecting + next, [100, 404, 200]),
            ("DELETE /v1/collections/c/items/none" + expecting + next, [100, 404, 200]),
            ("GET /v1/collections/c/changes?timeout=0" + expecting + next, [100, 200, 200]),
        ] {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 5)
            connection.send(Array(request.utf8))
            var statuses: [Int] = []
            for _ in answers { statuses.append((try? connection.readResponse().status) ?? 0) }
            #expect(statuses == answers, "\(request.prefix(40))")
        }
        #expect(!server.log.contains("refused the"), "\(server.log.suffix(1000))")
    }

    /// Bodies take memory as they arrive: a body announced and not sent holds none (16 header-only requests of
    /// 16 MiB once took the whole default budget, and every write got `503`), one that arrived holds what it sent,
    /// and a body that does not fit in what is left is refused.
    @Test func bodiesInFlightShareOneMemoryBudget() throws {
        let server = try ServerProcess(Self.budgetFlags)
        let body = Array(#"{"sections": []}"#.utf8) + [UInt8](repeating: 0x20, count: 700_000 - 16)
        func inFlight(_ bytes: Int) -> Bool {
            waitUntil(timeout: 10) { (try? server.metric("changeserver_body_bytes_in_flight")) == bytes }
        }
        let first = try HTTPConnection(port: server.port)
        first.send(putHead("/v1/collections/a", "Content-Length: \(body.count)\r\n") + body.prefix(1000))
        #expect(inFlight(1000))
        let second = try HTTPConnection(port: server.port)
        second.sendRequest("PUT", "/v1/collections/b", headers: ["Content-Type": "application/json"], body: body)
        #expect(try second.readResponse().status == 201, "the first body's announced length is not held")
        first.send(Array(body.dropFirst(1000).dropLast(1000)))
        #expect(inFlight(body.count - 1000))
        second.sendRequest("PUT", "/v1/collections/b", headers: ["Content-Type": "application/json"], body: body)
        let busy = try second.readResponse()
        #expect(busy.status == 503)
        #expect(busy.errorCode == "server_busy")
        #expect(busy.header("Retry-After") == "1")
        // A connection kept to retry on would hold one of those kept back for `/healthz` and writes: it closes.
        #expect(busy.header("Connection") == "close" && second.isClosed(within: 5))
        // A client that waits for `100 Continue` gets the refusal instead, before it sends its body.
        let waiting = try HTTPConnection(port: server.port)
        waiting.sendRequest(
            "PUT", "/v1/collections/c",
            headers: [
                "Content-Type": "application/json", "Content-Length": "\(body.count)", "Expect": "100-continue",
            ])
        let refusedFirst = try waiting.readResponse()
        #expect(refusedFirst.status == 503)
        #expect(refusedFirst.errorCode == "server_busy")
        first.send(Array(body.suffix(1000)))
        #expect(try first.readResponse().status == 201)
        let again = try HTTPConnection(port: server.port)
        again.sendRequest("PUT", "/v1/collections/b", headers: ["Content-Type": "application/json"], body: body)
        #expect(try again.readResponse().status == 200)
        #expect(try server.metric("changeserver_body_bytes_in_flight") == 0)
    }

    /// Two bodies that each fit when their headers arrive and run out of room together: the one that ran out
    /// gives its share back at once, so the other completes (both were refused when the first held its share
    /// while it discarded the rest of its body).
    @Test func bodiesThatRunOutOfRoomTogetherLetOneThrough() throws {
        let server = try ServerProcess(Self.budgetFlags)
        let body = Array(#"{"sections": []}"#.utf8) + [UInt8](repeating: 0x20, count: 700_000 - 16)
        func inFlight(_ bytes: Int) -> Bool {
            waitUntil(timeout: 10) { (try? server.metric("changeserver_body_bytes_in_flight")) == bytes }
        }
        func start(_ name: String, _ prefix: Int) throws -> HTTPConnection {
            let connection = try HTTPConnection(port: server.port)
            connection.send(
                putHead("/v1/collections/\(name)", "Content-Length: \(body.count)\r\n") + body.prefix(prefix))
            return connection
        }
        let first = try start("a", 100_000)
        #expect(inFlight(100_000))
        let second = try start("b", 400_000)
        #expect(inFlight(500_000))
        first.send(Array(body[100_000..<650_000]))
        #expect(inFlight(400_000), "the first gave back its share when it ran out of room")
        first.send(Array(body[650_000...]))
        second.send(Array(body[400_000...]))
        let answers = [try first.readResponse().status, try second.readResponse().status]
        #expect(answers == [503, 201])
        #expect(try server.client.get("/v1/collections/b").status == 200)
        #expect(try server.metric("changeserver_body_bytes_in_flight") == 0)
        // A chunked body that goes past --max-body-bytes gives its share back as soon as it does, not at its end.
        // Its first part is seen held before the rest is sent, so that nothing held means it was dropped.
        let oversized = try HTTPConnection(port: server.port)
        oversized.send(
            putHead("/v1/collections/c", "Transfer-Encoding: chunked\r\n") + Array("C5C10\r\n".utf8)
                + [UInt8](repeating: 0x20, count: 400_000))
        #expect(inFlight(400_000))
        oversized.send([UInt8](repeating: 0x20, count: 410_000))
        #expect(inFlight(0), "the dropped body holds nothing")
        let third = try HTTPConnection(port: server.port)
        third.sendRequest("PUT", "/v1/collections/d", headers: ["Content-Type": "application/json"], body: body)
        #expect(try third.readResponse().status == 201)
        oversized.send(Array("\r\n0\r\n\r\n".utf8))
        #expect(try oversized.readResponse().status == 413)
    }

    /// A body that stops arriving gets `408` after `--body-timeout` and its connection is closed; nothing of it is
    /// stored. One that keeps arriving, however slowly, is taken.
    @Test func aStalledBodyGets408() throws {
        let server = try ServerProcess(["--body-timeout", "1", "--write-token", "w"])
        let head = putHead("/v1/collections/c", "Authorization: Bearer w\r\nContent-Length: 15\r\n")
        let stalled = try HTTPConnection(port: server.port, receiveTimeout: 10)
        stalled.send(head + Array(#"{"sec"#.utf8))
        let response = try stalled.readResponse()
        #expect(response.status == 408)
        #expect(response.errorCode == "request_timeout")
        #expect(response.text.contains("--body-timeout"))
        #expect(response.header("Connection") == "close")
        #expect(stalled.isClosed(within: 5))
        #expect(try server.client.get("/v1/collections/c").status == 404)
        #expect(try server.metric("changeserver_body_bytes_in_flight") == 0)
        #expect(waitUntil(timeout: 10) { server.log.contains("PUT /v1/collections/c 408 ") })
        // A request refused from its headers whose body stalls gets its refusal; a HEAD gets no body.
        let refused = try HTTPConnection(port: server.port, receiveTimeout: 10)
        refused.send(putHead("/v1/collections/c", "Content-Length: 15\r\n") + Array("{".utf8))
        let unauthorized = try refused.readResponse()
        #expect(unauthorized.status == 401)
        #expect(unauthorized.errorCode == "unauthorized")
        let head408 = try HTTPConnection(port: server.port, receiveTimeout: 10)
        head408.send(Array("HEAD /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 15\r\n\r\n{".utf8))
        let headAnswer = try head408.readResponse(method: "HEAD")
        #expect(headAnswer.status == 408)
        #expect(head408.unreadByteCount == 0, "nothing after the head")
        #expect(head408.isClosed(within: 5), "nothing after the head")
        // A body that keeps arriving is taken though it takes longer than the timeout in all: here a second between
        // pieces, two short of a timeout of three (a loaded machine's delays fit in that).
        let patient = try ServerProcess(["--body-timeout", "3", "--write-token", "w"])
        let slow = try HTTPConnection(port: patient.port)
        slow.send(head)
        for piece in [#"{"se"#, #"cti"#, #"ons"#, #"":[]}"#] {
            usleep(1_000_000)
            slow.send(Array(piece.utf8))
        }
        #expect(try slow.readResponse().status == 201)
    }

    /// A client that closes its connection midway through a body is let go within seconds, and logged `499`.
    /// libmicrohttpd 0.9.75 (epoll) can miss a hang-up that comes with the last bytes: such a connection stayed
    /// in `CLOSE-WAIT`, one of `--max-connections`, until its idle timeout (120 s).
    @Test func aClientThatLeavesMidBodyIsLetGo() throws {
        let server = try ServerProcess(["--threads", "1"])
        var ports: [Int] = []
        for index in 0..<8 {
            let connection = try HTTPConnection(port: server.port)
            ports.append(connection.localPort)
            connection.send(
                putHead("/v1/collections/c\(index)", "Content-Length: 100000\r\n") + Array(#"{"sections""#.utf8))
            connection.close()
        }
        let lingering = {
            LoopbackTCP.sockets().filter { $0.localPort == server.port && ports.contains($0.remotePort) }.count
        }
        #expect(waitUntil(timeout: 10) { lingering() == 0 }, "\(lingering()) of 8 connections still open")
        #expect(waitUntil(timeout: 10) { server.log.components(separatedBy: " 499 ").count == 9 })
        #expect(try server.metric("changeserver_body_bytes_in_flight") == 0)
        #expect(try server.client.get("/v1/collections/c0").status == 404)
    }

    /// A body of 16 MiB of empty objects: memory stays a small multiple of it, and the loops keep answering.
    @Test func aDenseBodyCostsASmallMultipleOfItself() throws {
        let server = try ServerProcess(["--threads", "2"])
        let count = (16 << 20) / 3
        var body: [UInt8] = [UInt8(ascii: "[")]
        body.reserveCapacity(count * 3 + 2)
        for index in 0..<count {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body += [UInt8(ascii: "{"), UInt8(ascii: "}")]
        }
        body.append(UInt8(ascii: "]"))
        let before = memory(server, "VmHWM")
        let upload = try HTTPConnection(port: server.port, receiveTimeout: 60)
        upload.sendRequest("PUT", "/v1/collections/c", headers: ["Content-Type": "application/json"], body: body)
        let sent = Date()
        var slowest = 0.0
        for _ in 0..<10 {
            let started = Date()
            #expect(try server.client.get("/healthz").status == 200)
            slowest = max(slowest, Date().timeIntervalSince(started))
            usleep(50_000)
        }
        #expect(try upload.readResponse().status == 400)
        // A loop held by the decoding would keep a probe for about as long as the body took from its last bytes to
        // its answer; a loaded machine slows both.
        let decodeSeconds = Date().timeIntervalSince(sent)
        #expect(slowest < max(1, decodeSeconds / 2), "/healthz took \(slowest) s of the decoding's \(decodeSeconds) s")
        let peak = memory(server, "VmHWM") - before
        #expect(peak < 8 * (16 << 10), "peak resident memory grew by \(peak) KiB for 16 MiB")
    }
}
