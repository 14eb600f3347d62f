import Foundation
import ProcessSupport
import Testing

/// Answers that must go out, and be logged, whatever the client or the connection's room does.
extension LiveHardeningTests {
    /// A held request whose client left before its answer (libmicrohttpd ends it when it reads the end of the
    /// stream on resuming it) is logged `499`: mutations that took effect unanswered had no log line at all.
    @Test func everyHeldRequestIsLoggedOnce() throws {
        let server = try ServerProcess(["--fsync", "always"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let count = 20
        for index in 0..<count {
            let connection = try HTTPConnection(port: server.port)
            connection.sendRequest(
                "PUT", "/v1/collections/c/items/i\(index)", headers: ["Content-Type": "application/json"],
                body: Array(#"{"data": 1}"#.utf8))
            connection.close()
        }
        let items = {
            (try? server.client.get("/v1/collections/c").object["sections"] as? [[String: Any]])?
                .first?["items"] as? [Any]
        }
        #expect(waitUntil(timeout: 10) { items()?.count == count })
        let lines = { (0..<count).filter { server.log.contains("PUT /v1/collections/c/items/i\($0) ") }.count }
        #expect(waitUntil(timeout: 10) { lines() == count }, "\(lines()) of \(count) mutations logged")
        for index in 0..<count {
            #expect(server.log.components(separatedBy: "PUT /v1/collections/c/items/i\(index) ").count == 2)
        }
    }

    /// Polls whose clients shut their writing side down with the request are let go unanswered, each logged `499`:
    /// when libmicrohttpd read the end of the stream before the poll's resume, the `499` had been dropped.
    @Test func pollsWhoseClientsLeaveAtOnceAreLogged() throws {
        let server = try ServerProcess()
        let count = 20
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let clients = try (0..<count).map { _ in
            let poll = try HTTPConnection(port: server.port)
            poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=30")
            poll.shutdownWriting()
            return poll
        }
        let polls = { server.logCount(of: "GET /v1/collections/c/changes 499 ") }
        #expect(waitUntil(timeout: 10) { polls() == count }, "\(polls()) of \(count) polls logged")
        #expect(try server.metric("changeserver_held_polls") == 0)
        #expect(clients.allSatisfy { $0.isClosed(within: 5) }, "closed without an answer")
    }

    @Test func responsesThatDoNotFitTheConnectionAreAnsweredAndCounted() throws {
        let origin = "https://" + String(repeating: "a", count: 3950)
        let fitting = "https://" + String(repeating: "a", count: 3000)
        let server = try ServerProcess(["--cors-origin", origin, "--cors-origin", fitting])
        let connection = try HTTPConnection(port: server.port)
        connection.sendRequest("GET", "/healthz", headers: ["Origin": origin])
        let response = try connection.readResponse()
        // The echoed Origin would not fit next to the request's: the request's headers are too large for an answer.
        #expect(response.status == 431)
        #expect(response.errorCode == "headers_too_large")
        #expect(response.text.contains("--connection-memory"))
        #expect(try server.metric("changeserver_response_failures_total") == 1)
        #expect(
            waitUntil(timeout: 10) {
                server.log.contains(
                    "the 200 response to GET /healthz does not fit the connection's memory next to the request's "
                        + "headers; answered 431 instead")
            })
        // Answered through libmicrohttpd: the connection goes on. The next failures are counted, not logged: a
        // client can cause them at will.
        connection.sendRequest("GET", "/healthz")
        #expect(try connection.readResponse().status == 200)
        for _ in 0..<20 {
            connection.sendRequest("GET", "/healthz", headers: ["Origin": origin])
            #expect(try connection.readResponse().status == 431)
        }
        #expect(try server.metric("changeserver_response_failures_total") == 21)
        #expect(server.logCount(of: "does not fit the connection's memory") == 1)
        let fits = try server.client.get("/healthz", headers: ["Origin": fitting])
        #expect(fits.status == 200)
    }

    /// A write whose answer would not fit in the connection's memory next to its request's headers is refused `431`
    /// before it is applied, never committed and then answered `431`: a `4xx` changes nothing, and a client that
    /// repeats a write it saw refused must not find it done (`409`) or done twice. Every header size of the window
    /// where that decides is swept, for each kind of write, with an echoed `Origin`, on connections kept and closed.
    @Test func aWriteWhoseAnswerWouldNotFitIsRefusedBeforeItIsApplied() throws {
        let server = try ServerProcess(["--connection-memory", "2560", "--cors-origin", "https://client.example"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        func version() throws -> String {
            try #require(try server.client.get("/v1/collections/c").object["version"] as? String)
        }
        var statuses: [Int: Int] = [:]
        for size in stride(from: 1600, through: 2000, by: 2) {
            let id = "i\(size)"
            let writes: [(method: String, path: String, body: String)] = [
                ("PUT", "/v1/collections/c/items/\(id)", #"{"data": 1}"#),
                (
                    "POST", "/v1/collections/c/mutations",
                    #"{"ops": [{"op": "insertItems", "at": [0, 0], "items": [{"id": "m\#(size)", "data": 2}]}]}"#
                ),
                ("PUT", "/v1/views/v\(size)", #"{"source": "c"}"#),
                ("DELETE", "/v1/collections/c/items/\(id)", ""),
            ]
            for (index, write) in writes.enumerated() {
                let before = try version()
                let connection = try HTTPConnection(port: server.port)
                connection.sendRequest(
                    write.method, write.path,
                    headers: [
                        "Content-Type": "application/json", "Origin": "https://client.example",
                        "X-Padding": String(repeating: "p", count: size),
                    ],
                    body: write.body.isEmpty ? nil : Array(write.body.utf8), close: (size + index) % 2 == 0)
                let response = try connection.readResponse(method: write.method)
                statuses[response.status, default: 0] += 1
                let what = "\(write.method) \(write.path), \(size) bytes of padding"
                #expect([200, 201, 404, 431].contains(response.status), "\(what): \(response.status)")
                let after = try version()
                if write.path.hasPrefix("/v1/views/") {
                    let view = try server.client.get(write.path).status
                    #expect(view == (response.status == 201 ? 200 : 404), "\(what): \(response.status), view \(view)")
                } else if response.status == 431 || response.status == 404 {
                    #expect(after == before, "\(what): answered \(response.status), yet \(before) became \(after)")
                } else {
                    #expect(after != before, "\(what): answered \(response.status), yet still \(before)")
                }
            }
        }
        #expect(statuses[431, default: 0] > 0 && statuses[201, default: 0] > 0, "\(statuses)")
        #expect(try server.client.get("/healthz").status == 200)
    }

    /// The same for a chunked body's trailers, which libmicrohttpd keeps in the connection's memory too, after the
    /// headers were checked: a write whose trailers took the room of its answer was committed, then closed without
    /// a word (libmicrohttpd drops an answer that does not fit). Every trailer size of the window is swept; each
    /// write is either answered `2xx` and applied, or refused (or closed) and not applied.
    @Test func aWriteWhoseTrailersLeaveNoRoomForItsAnswerIsRefusedBeforeItIsApplied() throws {
        let server = try ServerProcess(["--connection-memory", "2560"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        var statuses: [Int: Int] = [:]
        let body = Array(#"{"data": 1}"#.utf8)
        for size in stride(from: 1700, through: 2300, by: 4) {
            let connection = try HTTPConnection(port: server.port)
            connection.send(
                Array(
                    ("PUT /v1/collections/c/items/t\(size) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + String(body.count, radix: 16) + "\r\n").utf8) + body
                    + Array(("\r\n0\r\nX-Trailer: \(String(repeating: "p", count: size))\r\n\r\n").utf8))
            let status = (try? connection.readResponse(method: "PUT").status) ?? 0
            statuses[status, default: 0] += 1
            let applied = try server.client.get("/v1/collections/c/items/t\(size)").status == 200
            #expect(applied == (200..<300).contains(status), "\(size) bytes of trailer: \(status), applied \(applied)")
        }
        #expect(statuses[201, default: 0] > 0 && statuses[431, default: 0] > 0, "\(statuses)")
    }
}
