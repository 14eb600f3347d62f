import Foundation
import ProcessSupport
import Testing

@Suite(.tags(.liveServer)) struct LiveAccessTests {
    @Test func writeTokenGuardsMutationsOnly() throws {
        let server = try ServerProcess(["--write-token", "w-secret"])
        let denied = try server.client.put("/v1/collections/c", ["sections": []])
        #expect(denied.status == 401)
        #expect(denied.errorCode == "unauthorized")
        #expect(denied.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        #expect(
            try server.client.put("/v1/collections/c", ["sections": []], headers: ["Authorization": "Bearer wrong"])
                .status == 401)
        #expect(
            try server.client.put("/v1/collections/c", ["sections": []], headers: ["Authorization": "Bearer w-secret"])
                .status == 201)
        #expect(try server.client.get("/v1/collections/c").status == 200)
        #expect(waitUntil(timeout: 10) { server.log.contains(" GET /v1/collections/c 200 ") })
        #expect(!server.log.contains("w-secret"))
    }

    @Test func readTokenGuardsReadsAndWriteTokenAlsoReads() throws {
        let server = try ServerProcess(
            [], environment: ["CHANGESERVER_READ_TOKEN": "r", "CHANGESERVER_WRITE_TOKEN": "w"])
        #expect(
            try server.client.put("/v1/collections/c", ["sections": []], headers: ["Authorization": "Bearer r"]).status
                == 401)
        #expect(
            try server.client.put("/v1/collections/c", ["sections": []], headers: ["Authorization": "Bearer w"]).status
                == 201)
        #expect(try server.client.get("/v1/collections/c").status == 401)
        #expect(try server.client.get("/v1/collections/c", headers: ["Authorization": "Bearer r"]).status == 200)
        #expect(try server.client.get("/v1/collections/c", headers: ["Authorization": "bearer w"]).status == 200)
        #expect(
            try server.client.get("/v1/collections/c/changes", headers: ["Authorization": "Bearer x"]).status == 401)
        #expect(try server.client.get("/healthz").status == 200)
    }

    /// Answers to reads refused from their headers alone (before their route runs: an unknown path, a method the
    /// path does not take, a missing token) say `no-store` too, as every read's answer outside the feed does, and a
    /// snapshot the server serves says `no-cache`.
    @Test func readsRefusedFromTheirHeadersAreNotStored() throws {
        let server = try ServerProcess(
            [], environment: ["CHANGESERVER_READ_TOKEN": "r", "CHANGESERVER_WRITE_TOKEN": "w"])
        let token = ["Authorization": "Bearer w"]
        #expect(try server.client.put("/v1/collections/c", ["sections": []], headers: token).status == 201)
        let refused = [
            try server.client.get("/v1/collections/c"), try server.client.get("/v1/nothing", headers: token),
            try server.client.get("/v1/collections/c/mutations", headers: token),
            try server.client.request("HEAD", "/v1/collections/c"),
        ]
        #expect(refused.map(\.status) == [401, 404, 405, 401])
        for answer in refused { #expect(answer.header("Cache-Control") == "no-store", "\(answer.status)") }
        #expect(try server.client.get("/v1/collections/c", headers: token).header("Cache-Control") == "no-cache")
    }

    @Test func corsAllowsListedOriginsOnly() throws {
        let server = try ServerProcess(["--cors-origin", "https://app.example", "--cors-origin", "https://b.example"])
        _ = try server.client.put("/v1/collections/c", ["sections": []])
        let allowed = try server.client.get("/v1/collections/c", headers: ["Origin": "https://app.example"])
        #expect(allowed.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(allowed.header("Access-Control-Expose-Headers") == "ETag, Retry-After")
        let other = try server.client.get("/v1/collections/c", headers: ["Origin": "https://evil.example"])
        #expect(other.header("Access-Control-Allow-Origin") == nil)
        // A cache must not give an answer stored for a request without an allowed `Origin` to a browser.
        #expect(other.header("Vary") == "Origin")
        let without = try server.client.get("/v1/collections/c/changes")
        #expect(without.header("Vary") == "Accept, Origin")
        #expect(without.header("Access-Control-Allow-Origin") == nil)
        let preflight = try server.client.request(
            "OPTIONS", "/v1/collections/c/mutations",
            headers: ["Origin": "https://b.example", "Access-Control-Request-Method": "POST"])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == "https://b.example")
        #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("Authorization") == true)
        // A stream read with `fetch` resumes from `Last-Event-ID`, as `EventSource` does.
        let streamPreflight = try server.client.request(
            "OPTIONS", "/v1/collections/c/changes",
            headers: [
                "Origin": "https://b.example", "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "last-event-id",
            ])
        #expect(streamPreflight.status == 204)
        let allowedHeaders = try #require(streamPreflight.header("Access-Control-Allow-Headers"))
        #expect(
            allowedHeaders.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .contains("last-event-id"))
    }

    @Test func anAbsoluteFormTargetIsServed() throws {
        let server = try ServerProcess()
        _ = try server.client.put("/v1/collections/c", ["sections": []])
        let connection = try HTTPConnection(port: server.port)
        connection.sendRequest("GET", "http://127.0.0.1:\(server.port)/v1/collections/c")
        let answer = try connection.readResponse()
        #expect(answer.status == 200)
        #expect(answer.object["collection"] as? String == "c")
    }

    /// `*` allows every origin with one answer: no `Vary: Origin`, so that a cache keeps one feed answer for every
    /// origin (echoing each `Origin` split the feed's collapsing by origin).
    @Test func anyOriginIsAllowedWithOneAnswer() throws {
        let server = try ServerProcess(["--cors-origin", "*"])
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        for origin in ["https://a.example", "https://b.example", nil] {
            let headers = origin.map { ["Origin": $0] } ?? [:]
            let snapshot = try server.client.get("/v1/collections/c", headers: headers)
            #expect(snapshot.header("Access-Control-Allow-Origin") == "*", "\(origin ?? "no origin")")
            #expect(snapshot.header("Access-Control-Expose-Headers") == "ETag, Retry-After")
            #expect(snapshot.header("Vary") == nil, "\(origin ?? "no origin")")
            let feed = try server.client.get(
                "/v1/collections/c/changes?since=\(version)&timeout=0", headers: headers)
            #expect(feed.header("Vary") == "Accept" && feed.header("Access-Control-Allow-Origin") == "*")
        }
        // Snapshot reads are answered quickly (their CORS headers are the same for all), the same bytes either way:
        // two `If-None-Match` lines of other versions take the usual way and get the same `200`.
        let quickReads = { (try? server.metric("changeserver_quick_reads_total")) ?? 0 }
        let quickBefore = quickReads()
        let reads = try (0..<3).map { index in
            try server.client.get("/v1/collections/c", headers: index == 0 ? [:] : ["Origin": "https://a.example"])
        }
        #expect(waitUntil(timeout: 10) { quickReads() >= quickBefore + 3 }, "counted at the end of a loop's turn")
        let usual = try HTTPConnection(port: server.port)
        usual.send(
            Array(
                ("GET /v1/collections/c HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \"x.1\"\r\n"
                    + "If-None-Match: \"x.2\"\r\nConnection: close\r\n\r\n").utf8))
        let usualRead = try usual.readResponse()
        for read in reads + [usualRead] {
            #expect(
                read.status == 200 && read.header("Access-Control-Allow-Origin") == "*" && read.header("Vary") == nil)
            #expect(read.body == reads[0].body)
            var headers = read.headers
            var first = reads[0].headers
            for name in ["date", "connection"] {
                headers[name] = nil
                first[name] = nil
            }
            #expect(headers == first)
        }
        let preflight = try server.client.request(
            "OPTIONS", "/v1/collections/c/mutations",
            headers: ["Origin": "https://c.example", "Access-Control-Request-Method": "POST"])
        #expect(preflight.status == 204 && preflight.header("Access-Control-Allow-Origin") == "*")
        #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
    }

    @Test func heldPollsKeepTheirOriginsHeaders() throws {
        let server = try ServerProcess(["--cors-origin", "https://a.example"])
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let withOrigin = try HTTPConnection(port: server.port)
        withOrigin.sendRequest(
            "GET", "/v1/collections/c/changes?since=\(version)", headers: ["Origin": "https://a.example"])
        let without = try HTTPConnection(port: server.port)
        without.sendRequest("GET", "/v1/collections/c/changes?since=\(version)")
        try waitForHeldPolls(server, 2)
        _ = try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]])
        let allowed = try withOrigin.readResponse()
        #expect(allowed.header("Access-Control-Allow-Origin") == "https://a.example")
        let plain = try without.readResponse()
        #expect(plain.header("Access-Control-Allow-Origin") == nil)
        // A feed answer varies with `Accept` and, under CORS, with `Origin`: on one line, for caches that read one.
        for answer in [allowed, plain] {
            #expect(answer.header("Vary") == "Accept, Origin")
            #expect(answer.headerLineCounts["vary"] == 1)
        }
        let answeredAtOnce = try server.client.get(
            "/v1/collections/c/changes?since=\(version)&timeout=0", headers: ["Origin": "https://a.example"])
        #expect(answeredAtOnce.header("Vary") == "Accept, Origin" && answeredAtOnce.headerLineCounts["vary"] == 1)
        let stream = try EventStreamReader(
            port: server.port, path: "/v1/collections/c/changes", headers: ["Origin": "https://a.example"])
        #expect(stream.status == 200 && stream.headers["vary"] == "Accept, Origin")
    }
}
