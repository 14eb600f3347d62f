import Foundation
import ProcessSupport
import Testing

/// Request lines and headers: slow, malformed, ambiguous or too large for the connection.
extension LiveHardeningTests {
    /// A request whose headers trickle in gets `408` `--header-timeout` after its first bytes were seen (about a
    /// second later at most), and its connection is closed: before, every byte restarted libmicrohttpd's 120 s idle
    /// timeout, so a client sending a byte a minute kept its connection as long as it liked (slowloris). An idle
    /// connection, one that pauses between requests (after an empty line), and a held poll are not cut.
    @Test func headersThatTrickleGet408() throws {
        let server = try ServerProcess(["--header-timeout", "1"])
        #expect(try server.client.put("/v1/collections/c", ["sections": []]).status == 201)
        let version = try #require(try server.client.get("/v1/collections/c").object["version"] as? String)
        let idle = try HTTPConnection(port: server.port)
        let pausing = try HTTPConnection(port: server.port)
        pausing.sendRequest("GET", "/healthz")
        #expect(try pausing.readResponse().status == 200)
        let poll = try HTTPConnection(port: server.port)
        poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=4")
        let trickling = try HTTPConnection(port: server.port)
        let head = Array("GET /v1/collections HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
        let started = Date()
        var sent = 0
        // A byte every 300 ms, well inside the idle timeout, for at most 18 s.
        while sent < 60 && !trickling.isReadable(within: 0.3) {
            trickling.send([head[sent % head.count]])
            sent += 1
            // An empty line between requests (RFC 9112 §2.2), sent once the connection was looked at idle, is not a
            // request begun.
            if sent == 5 { pausing.send(Array("\r\n".utf8)) }
        }
        let elapsed = Date().timeIntervalSince(started)
        let response = try trickling.readResponse()
        #expect(response.status == 408)
        #expect(response.errorCode == "request_timeout")
        #expect(response.text.contains("--header-timeout"))
        #expect(response.header("Connection") == "close")
        #expect(trickling.isClosed(within: 5))
        #expect(elapsed >= 1 && elapsed < 10, "answered after \(elapsed) s")
        #expect(waitUntil(timeout: 10) { server.log.contains(" - - 408 ") })
        idle.sendRequest("GET", "/healthz")
        #expect(try idle.readResponse().status == 200)
        #expect(!pausing.isReadable(within: 2.5), "the connection that sent an empty line was answered or closed")
        pausing.sendRequest("GET", "/healthz")
        #expect(try pausing.readResponse().status == 200)
        let polled = try poll.readResponse()
        #expect(polled.status == 200)
        #expect(polled.object["to"] as? String == version)
    }

    /// Bytes of a path that are not UTF-8 are refused as their percent-encoded form is, `400 bad_request`: they were
    /// replaced with U+FFFD, so a write went through under another id, and two different such ids named one item. A
    /// `Content-Length` past `Int` (2^63 to 2^64 - 1, which libmicrohttpd takes) is `413` at once: it was read as no
    /// body at all, and the request got no answer until libmicrohttpd's idle timeout, 120 s later.
    @Test func pathsThatAreNotUTF8AndLengthsPastIntAreRefused() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        // `\xC3%A9` once decoded to `é`: the `%` of a path that is not UTF-8 is encoded too.
        for id: [UInt8] in [[0xFF], [0xC3, 0xA9, 0xED, 0xA0, 0x80], Array("%FF".utf8), [0xC3] + Array("%A9".utf8)] {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
            let body = Array(#"{"data":1}"#.utf8)
            let rest =
                " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
            connection.send(Array("PUT /v1/collections/c/items/".utf8) + id + Array(rest.utf8) + body)
            let response = try connection.readResponse()
            #expect(response.status == 400, "\(id): \(response.text)")
            #expect(response.errorCode == "bad_request")
        }
        let sections = try server.client.get("/v1/collections/c").object["sections"] as? [[String: Any]]
        #expect((sections?.first?["items"] as? [Any])?.count == 0, "no item was written")
        for length in ["9223372036854775808", "18446744073709551615"] {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
            connection.send(putHead("/v1/collections/d", "Content-Length: \(length)\r\n") + Array("{".utf8))
            let response = try connection.readResponse()
            #expect(response.status == 413, "\(length)")
            #expect(response.errorCode == "payload_too_large")
        }
        #expect(try server.client.get("/v1/collections/d").status == 404)
    }

    @Test func twoDifferentContentLengthsAre400() throws {
        let server = try ServerProcess()
        let connection = try HTTPConnection(port: server.port)
        connection.send(
            Array(
                ("PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 15\r\nContent-Length: 16\r\n\r\n{\"sections\":[]}").utf8))
        let response = try connection.readResponse()
        #expect(response.status == 400)
        #expect(response.text.contains("Content-Length"))
        #expect(try server.client.get("/v1/collections/c").status == 404)
    }

    /// A body announced both by its length and as chunked is where request smuggling starts (a front that frames
    /// it by `Content-Length` and a server that reads it chunked disagree on where the next request begins): it is
    /// refused `400` at once, nothing after it on the connection is read, and the connection closes (RFC 9112 §6.1).
    @Test func aBodyWithBothLengthAndTransferCodingIs400AndTheConnectionCloses() throws {
        let server = try ServerProcess()
        let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
        connection.send(
            Array(
                ("PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nf\r\n{\"sections\":[]}\r\n0\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").utf8))
        let response = try connection.readResponse()
        #expect(response.status == 400 && response.errorCode == "bad_request")
        #expect(response.text.contains("Content-Length and Transfer-Encoding"))
        #expect(connection.isClosed(within: 5), "the pipelined request after it is never answered")
        #expect(try server.client.get("/v1/collections/c").status == 404)
    }

    /// An HTTP/1.1 request must name its host once (RFC 9112 §3.2): none, or several, is `400 bad_request`, also
    /// for a read that would be answered quickly (libmicrohttpd 0.9.75 checks neither). An HTTP/1.0 request may
    /// leave it out.
    @Test func aRequestWithoutOneHostIs400() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": []]).status == 201)
        // Read twice first: the snapshot is encoded, so the next read of it would take the quick way.
        for _ in 0..<2 { #expect(try server.client.get("/v1/collections/c").status == 200) }
        let cases = [
            ("", "HTTP/1.1", "needs a Host header"), ("Host: a\r\nHost: b\r\n", "HTTP/1.1", "2 Host headers"),
            ("Host: a\r\nHost: a\r\n", "HTTP/1.0", "2 Host headers"),
        ]
        for (hosts, version, message) in cases {
            for path in ["/v1/collections/c", "/healthz"] {
                let connection = try HTTPConnection(port: server.port)
                connection.send(Array("GET \(path) \(version)\r\n\(hosts)\r\n".utf8))
                let response = try connection.readResponse()
                let what = "\(version) \(hosts.debugDescription) \(path)"
                #expect(response.status == 400 && response.errorCode == "bad_request", "\(what)")
                #expect(response.text.contains(message), "\(what): \(response.text)")
            }
        }
        let oldClient = try HTTPConnection(port: server.port)
        oldClient.send(Array("GET /v1/collections/c HTTP/1.0\r\n\r\n".utf8))
        #expect(try oldClient.readResponse().status == 200)
    }

    /// A request target holding a space, a control character or DEL is `400` and the connection closes (RFC 9112
    /// §3.2): libmicrohttpd took the target as all that lies before the last space of the request line, so
    /// `PUT …/items/a b` wrote item `a b`, a bare CR made the next lines part of the target, and a NUL ended it (`PUT
    /// …/items/b<NUL>zz` wrote item `b`). So is a `Host` that
    /// is not a host and port, also on the quick way to a snapshot.
    @Test func aMalformedTargetOrHostIs400AndChangesNothing() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        // Read twice first: the snapshot is encoded, so the next read of it would take the quick way.
        for _ in 0..<2 { #expect(try server.client.get("/v1/collections/c").status == 200) }
        let body = #"{"data":1}"#
        func put(_ target: String, host: String = "127.0.0.1") -> String {
            "PUT \(target) HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        }
        var cases: [(request: String, message: String)] = ["a b", "a\tb", "a\u{1}b", "a\u{7F}b", "b\u{0}zz"].map {
            (put("/v1/collections/c/items/\($0)"), "request target")
        }
        cases.append((put("/v1/collections/c/items/x?note=a\u{1}b"), "request target"))
        // Reads too, on the quick way to a snapshot (read twice above) and the usual one, a held poll among them.
        for target in [
            "/v1/collections/c x", "/v1/collections/c?x=a\u{1}b", "/v1/collections/c/changes?timeout=3&x=a\u{1}b",
            "/v1/collections/a\u{7F}b", "/v1/collections/c\u{0}zz", "/v1/collections/c?x=a\u{0}b", "/v1/collections/c#",
        ] {
            for method in ["GET", "HEAD"] {
                cases.append(("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "request target"))
            }
        }
        cases.append(
            (
                "PUT /v1/collections/c/items/x HTTP/1.1\rHost: 127.0.0.1\rContent-Type: application/json\rContent-Length: "
                    + "10\r\r\(body)GET /v1/collections/c/items/y HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "request target"
            ))
        for host in ["a b", "a\u{1}b", "[::1", "x:80:81", "x,y:port"] {
            cases.append((put("/v1/collections/c/items/h", host: host), "Host header"))
            cases.append(("GET /v1/collections/c HTTP/1.1\r\nHost: \(host)\r\n\r\n", "Host header"))
            cases.append(("GET /healthz HTTP/1.1\r\nHost: \(host)\r\n\r\n", "Host header"))
        }
        for (request, message) in cases {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
            connection.send(Array(request.utf8))
            let response = try connection.readResponse(method: request.hasPrefix("HEAD") ? "HEAD" : "GET")
            if request.hasPrefix("HEAD") {
                #expect(response.status == 400, "\(request.prefix(80).debugDescription): \(response.status)")
                #expect(connection.isClosed(within: 5))
                continue
            }
            let what = request.prefix(80).debugDescription
            #expect(response.status == 400 && response.errorCode == "bad_request", "\(what): \(response.status)")
            #expect(response.text.contains(message), "\(what): \(response.text)")
            #expect(connection.isClosed(within: 5), "nothing after it is read: \(what)")
        }
        let items = try server.client.get("/v1/collections/c").object["sections"] as? [[String: Any]]
        #expect((items?.first?["items"] as? [Any])?.isEmpty == true, "\(items ?? [])")
        for host in ["[::1]:80", "", "db.internal:8080", "[fe80::1%25en0]"] {
            let connection = try HTTPConnection(port: server.port)
            connection.send(Array("GET /v1/collections/c HTTP/1.1\r\nHost: \(host)\r\n\r\n".utf8))
            #expect(try connection.readResponse().status == 200, "\(host)")
        }
        // A `+` in the query (a space to libmicrohttpd) is taken, on both ways.
        for target in ["/v1/collections/c?x=a+b", "/v1/collections?x=a+b"] {
            let connection = try HTTPConnection(port: server.port)
            connection.send(Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            #expect(try connection.readResponse().status == 200, "\(target)")
        }
    }

    /// A header line libmicrohttpd 0.9.75 misreads is `400`, and the connection closes. A line folded onto the next
    /// (obs-fold, which RFC 9112 §5.2 lets a server refuse) had its continuation joined to the header's name: a
    /// folded `If-None-Match: *` was lost, so a create-only `PUT` replaced a collection; a folded `If-Match` let a
    /// stale write through; a folded `Content-Length` left the body to be read as the next request, which deleted a
    /// collection. So did a space before the colon (which §5.1 says must be refused) or at the start of the first
    /// header line, kept in the name. A fold whose line ends at the end of libmicrohttpd's first read buffer (4096
    /// bytes with the default `--connection-memory`) is grown in place, and got through the first check. A NUL in
    /// a value (RFC 9110 §5.5: refuse it, or read it as a space) cut the value there: `If-None-Match: "zz.1"<NUL>, *`
    /// read as `"zz.1"`, and the create-only `PUT` replaced the collection.
    @Test func aMisreadHeaderIs400AndChangesNothing() throws {
        let server = try ServerProcess()
        let created = try server.client.put("/v1/collections/c", ["sections": [["id": "s", "items": [["id": "a"]]]]])
        let version = try #require(created.object["version"] as? String)
        // Read twice first: the snapshot is encoded, so a read of it may take the quick way.
        for _ in 0..<2 { #expect(try server.client.get("/v1/collections/c").status == 200) }
        let body = #"{"sections":[]}"#
        let put = "PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        let length = "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        let deletion = "DELETE /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        var requests = [
            put + "If-None-Match:\r\n *\r\n" + length,
            put + "If-Match: \"zz.1\"\r\n\t, \"zz.2\"\r\n" + length,
            "POST /v1/collections/c/mutations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length:\r\n \(deletion.utf8.count)\r\n\r\n" + deletion,
            "GET /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: one\r\n  two\r\n\r\n",
            put + "If-None-Match : *\r\n" + length,
            "PUT /v1/collections/c HTTP/1.1\r\n If-None-Match: *\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + length,
            "POST /v1/collections/c/mutations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length\t: \(deletion.utf8.count)\r\n\r\n" + deletion,
            // A NUL in a value: libmicrohttpd reads the value as cut there, and the condition after it was lost.
            put + "If-None-Match: \"zz.1\"\u{0}, *\r\n" + length,
            "PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nIf-None-Match: \"zz.1\"\u{0}, *\r\n\r\n" + body,
            put.replacingOccurrences(of: "application/json", with: "application/json\u{0}; charset=latin1") + length,
            "GET /v1/collections/c HTTP/1.1\nHost: 127.0.0.1\nX-Note: a\u{0}b\n\n",
        ]
        // The fold's line ending at each byte from 3,900 to 4,120 of the request: past the first read buffer's end.
        let padded = "PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Pad: "
        let fold = "If-None-Match:  *\r\n a\r\n"
        for end in 3900...4120 {
            let pad = String(repeating: "p", count: end - padded.utf8.count - 2 - fold.utf8.count)
            requests.append(padded + pad + "\r\n" + fold + length)
        }
        for request in requests {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
            connection.send(Array(request.utf8))
            let response = try connection.readResponse()
            let what = String(request.prefix(120)).debugDescription + " (\(request.utf8.count) bytes)"
            #expect(response.status == 400 && response.errorCode == "bad_request", "\(what)")
            #expect(response.text.contains("malformed"), "\(response.text)")
            #expect(connection.isClosed(within: 5), "nothing after it is read: \(what)")
        }
        let after = try server.client.get("/v1/collections/c")
        #expect(after.status == 200 && after.object["version"] as? String == version)
        // Spaces and tabs around a value, an empty value, and names with every character a name may have are read
        // as they are; so is a body that starts with a space after bare line feeds.
        let connection = try HTTPConnection(port: server.port)
        connection.send(
            Array(
                "GET /v1/collections/c HTTP/1.1\r\nHost:127.0.0.1\r\nX-A: \t a \r\nX-B:\r\nX!#$%&'*+.^_`|~9: x\r\n\r\n"
                    .utf8))
        #expect(try connection.readResponse().status == 200)
        let bare =
            "PUT /v1/collections/d HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nContent-Length: 16\n\n "
        connection.send(Array((bare + body).utf8))
        #expect(try connection.readResponse().status == 201)
    }

    /// libmicrohttpd reads a body into the connection's memory left after the headers: headers that left it none
    /// (by 0.9.75's accounting, one byte) made it wait for good, and the client with it. Every size of headers up to
    /// the limit is answered now, at once: the write, or `431` (found by a review; seen at each `--connection-memory`).
    @Test func headersThatLeaveNoRoomForTheBodyAreAnswered() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let head = "PUT /v1/collections/c/items/z HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: "
        let body = #"{"section":"s","data":1}"#
        var statuses: [Int: Int] = [:]
        for pad in 7300...7840 {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
            let request = head + String(repeating: "a", count: pad) + "\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            connection.send(Array((request + body).utf8))
            let response = try connection.readResponse()
            #expect([200, 201, 431].contains(response.status), "X-Pad of \(pad) bytes: \(response.status)")
            statuses[response.status, default: 0] += 1
        }
        #expect(
            statuses[431, default: 0] > 0 && statuses[200, default: 0] + statuses[201, default: 0] > 0, "\(statuses)")
    }

    /// The quick way to a snapshot reads one `If-None-Match` line: a request with several takes the usual way,
    /// which reads them as one list (a later line naming the version is a `304`, as on the first).
    /// A write's condition that names no version is refused from its headers: a client that waits for `100
    /// Continue` gets the `400` instead, before it sends its body.
    @Test func aMalformedConditionIsRefusedBeforeTheBody() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [] as [Any]]).status == 201)
        let waiting = try HTTPConnection(port: server.port)
        waiting.sendRequest(
            "PUT", "/v1/collections/c",
            headers: [
                "Content-Type": "application/json", "Content-Length": "100", "Expect": "100-continue",
                "If-None-Match": #""*""#,
            ])
        let refused = try waiting.readResponse()
        #expect(refused.status == 400 && refused.errorCode == "bad_request", "\(refused.status) \(refused.text)")
        #expect(refused.text.contains("If-None-Match must be * or a list of versions"))
    }

    @Test func severalIfNoneMatchLinesAreReadWholeOnTheQuickWay() throws {
        let server = try ServerProcess()
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        for _ in 0..<2 { #expect(try server.client.get("/v1/collections/c").status == 200) }
        let connection = try HTTPConnection(port: server.port)
        for lines in [["\"zz.1\"", "\"\(version)\""], ["\"\(version)\"", "\"zz.1\""]] {
            let tags = lines.map { "If-None-Match: \($0)\r\n" }.joined()
            connection.send(Array("GET /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\n\(tags)\r\n".utf8))
            #expect(try connection.readResponse().status == 304, "\(lines)")
        }
    }

    /// libmicrohttpd reads only `chunked` (matched whole, in any case) and would wait for the end of any other
    /// body until the client gives up: such requests are refused from their headers, and the connection closed.
    @Test func transferCodingsOtherThanChunkedAre501() throws {
        let server = try ServerProcess()
        for coding in ["gzip", "gzip, chunked", "identity", "chunked "] {
            let connection = try HTTPConnection(port: server.port, receiveTimeout: 10)
            connection.send(
                Array(
                    ("PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        + "Transfer-Encoding: \(coding)\r\n\r\n{\"sections\":[]}").utf8))
            let response = try connection.readResponse()
            #expect(response.status == 501, "\(coding)")
            #expect(response.errorCode == "unsupported_transfer_encoding", "\(coding)")
            #expect(response.header("Cache-Control") == "no-store", "\(coding)")
            #expect(connection.isClosed(within: 5), "\(coding)")
        }
        #expect(try server.client.get("/v1/collections/c").status == 404)
        let chunked = try HTTPConnection(port: server.port)
        chunked.send(
            Array(
                ("PUT /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Transfer-Encoding: Chunked\r\n\r\nf\r\n{\"sections\":[]}\r\n0\r\n\r\n").utf8))
        #expect(try chunked.readResponse().status == 201)
    }

    /// Headers just short of filling the connection's memory leave no room even for a bare answer through
    /// libmicrohttpd (which answers `431` itself only to headers that do not fit at all): the `431` is then written
    /// on the socket, and the connection closed. No size gets a `500` or a connection closed without an answer;
    /// nor does an event stream, whose headers are longer (a browser's `EventSource` would reconnect forever).
    @Test func headersOfEverySizeGetAnAnswer() throws {
        let server = try ServerProcess(["--connection-memory", "2560", "--cors-origin", "*"])
        #expect(try server.client.put("/v1/collections/c", ["sections": []]).status == 201)
        var statuses: [Int: Int] = [:]
        var streamStatuses: [Int: Int] = [:]
        var closedWithJSON = 0
        for size in stride(from: 1800, through: 2500, by: 10) {
            let padding = ["X-Padding": String(repeating: "p", count: size)]
            let connection = try HTTPConnection(port: server.port)
            connection.sendRequest("GET", "/healthz", headers: padding)
            let response = try connection.readResponse()
            statuses[response.status, default: 0] += 1
            #expect([200, 431].contains(response.status), "\(size): \(response.status)")
            if response.errorCode == "headers_too_large", response.header("Connection") == "close" {
                closedWithJSON += 1
                #expect(connection.isClosed(within: 5), "\(size)")
            }
            let stream = try EventStreamReader(port: server.port, path: "/v1/collections/c/changes", headers: padding)
            streamStatuses[stream.status, default: 0] += 1
            #expect([200, 431].contains(stream.status), "stream \(size): \(stream.status)")
            if stream.status == 200 { #expect(try stream.nextEvent()?.name == "reset", "stream \(size)") }
            stream.connection.close()
        }
        // A connection that may close costs libmicrohttpd a header more in the answer (`Connection: close` or
        // `Keep-Alive`), and the `431`'s reason phrase is long: with a long `Origin` (and the CORS headers of `*` in
        // the answer), every byte of the window where that decides is swept (200 up to 2,008 bytes of origin, 431
        // from 2,009 to 2,092 depending on the variant). A `HEAD`'s answer has no body, also when it is written on
        // the socket.
        for size in 1950...2300 {
            for variant in ["HTTP/1.0", "Connection: close", "HEAD"] {
                let method = variant == "HEAD" ? "HEAD" : "GET"
                let version = variant == "HTTP/1.0" ? "HTTP/1.0" : "HTTP/1.1"
                let close = variant == "Connection: close" ? "Connection: close\r\n" : ""
                let connection = try HTTPConnection(port: server.port)
                connection.send(
                    Array(
                        ("\(method) /healthz \(version)\r\nHost: 127.0.0.1\r\n\(close)"
                            + "Origin: https://\(String(repeating: "o", count: size))\r\n\r\n").utf8))
                let response = try connection.readResponse(method: method)
                statuses[response.status, default: 0] += 1
                #expect([200, 431].contains(response.status), "\(variant) \(size): \(response.status)")
                if method == "HEAD", response.header("Connection") == "close" {
                    #expect(connection.isClosed(within: 5), "\(variant) \(size)")
                    #expect(connection.unreadByteCount == 0, "a body after the HEAD answer, \(size)")
                }
            }
        }
        #expect(statuses[200, default: 0] > 0 && statuses[431, default: 0] > 0)
        #expect(streamStatuses[200, default: 0] > 0 && streamStatuses[431, default: 0] > 0)
        #expect(closedWithJSON > 0, "some sizes leave no room for an answer through libmicrohttpd")
        #expect(try server.client.get("/healthz").status == 200)
        #expect(try server.metric("changeserver_streams_open") == 0)
    }

    @Test func controlBytesOfTheRequestLineAreEscapedInTheLog() throws {
        let server = try ServerProcess()
        let connection = try HTTPConnection(port: server.port)
        connection.send(Array("GET /v1/collections/a\u{1B}[2Jb\u{07} HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        _ = try connection.readResponse()
        _ = try server.client.get("/healthz")
        let deadline = Date().addingTimeInterval(20)
        // Each loop hands its lines to the log writer on its own: wait for the line itself.
        while !server.log.contains("GET /v1/collections/a") && Date() < deadline { usleep(20_000) }
        #expect(server.log.contains(#"/v1/collections/a\x1B[2Jb\x07"#))
        #expect(!server.log.contains("\u{1B}"))
        #expect(!server.log.contains("\u{07}"))
    }
}
