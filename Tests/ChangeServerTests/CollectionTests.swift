import Foundation
import ProcessSupport
import Testing

@Suite(.tags(.liveServer)) struct LiveCollectionTests {
    static var inbox: [String: Any] {
        [
            "sections": [
                [
                    "id": "today", "data": ["title": "Today", "a": 1],
                    "items": [["id": "m1", "data": ["text": "hi"]], ["id": "m2"]],
                ],
                ["id": "later"],
            ]
        ]
    }

    @Test func createThenReadSnapshot() throws {
        let server = try ServerProcess()
        let created = try server.client.put("/v1/collections/inbox", Self.inbox)
        #expect(created.status == 201)
        let version = try #require(created.object["version"] as? String)
        #expect(version.hasSuffix(".1"))
        #expect(created.header("ETag") == "\"\(version)\"")
        let changes = try #require(created.object["changes"] as? [String: Any])
        #expect(changes["from"] as? String == version.dropLast() + "0")
        let insertedSections = (changes["sections"] as? [String: Any])?["inserted"] as? [[String: Any]]
        #expect(insertedSections?.map { $0["id"] as? String } == ["today", "later"])

        let snapshot = try server.client.get("/v1/collections/inbox")
        #expect(snapshot.status == 200)
        #expect(snapshot.header("ETag") == "\"\(version)\"")
        #expect(
            snapshot.text
                == #"{"collection":"inbox","version":"\#(version)","sections":[{"id":"today","data":{"a":1,"title":"Today"},"items":[{"id":"m1","data":{"text":"hi"}},{"id":"m2","data":null}]},{"id":"later","data":null,"items":[]}]}"#
        )
        let notModified = try server.client.get("/v1/collections/inbox", headers: ["If-None-Match": "\"\(version)\""])
        #expect(notModified.status == 304)
        #expect(notModified.body.isEmpty)
        #expect(try server.client.get("/v1/collections/inbox", headers: ["If-None-Match": "\"x.1\""]).status == 200)
    }

    /// A snapshot's response is built once per version and shared by its reads on every loop: a read with an
    /// allowed `Origin` still gets its own CORS headers, the shared one never carries them, and a new version is a
    /// new response.
    @Test func readsOfAVersionShareOneResponseAndKeepTheirOwnHeaders() throws {
        let server = try ServerProcess(["--threads", "2", "--cors-origin", "https://app.example"])
        let version1 = try #require(try server.client.put("/v1/collections/c", Self.inbox).object["version"] as? String)
        let origin = ["Origin": "https://app.example"]
        for round in 0..<4 {
            let plain = try server.client.get("/v1/collections/c")
            #expect(plain.status == 200 && plain.header("ETag") == "\"\(version1)\"", "round \(round)")
            #expect(plain.header("Access-Control-Allow-Origin") == nil, "round \(round)")
            #expect(plain.object["version"] as? String == version1)
            let withOrigin = try server.client.get("/v1/collections/c", headers: origin)
            #expect(withOrigin.header("Access-Control-Allow-Origin") == "https://app.example", "round \(round)")
            #expect(withOrigin.body == plain.body)
            let head = try server.client.request("HEAD", "/v1/collections/c")
            #expect(head.status == 200 && head.body.isEmpty && head.header("ETag") == "\"\(version1)\"")
            let notModified = try server.client.get(
                "/v1/collections/c", headers: origin.merging(["If-None-Match": "\"\(version1)\""]) { $1 })
            #expect(notModified.status == 304)
            #expect(notModified.header("Access-Control-Allow-Origin") == "https://app.example")
            let plainNotModified = try server.client.get(
                "/v1/collections/c", headers: ["If-None-Match": "W/\"\(version1)\""])
            #expect(plainNotModified.status == 304 && plainNotModified.header("Access-Control-Allow-Origin") == nil)
        }
        let upserted = try server.client.put("/v1/collections/c/items/m3", ["section": "later", "data": ["n": 1]])
        let version2 = try #require(upserted.object["version"] as? String)
        let after = try server.client.get("/v1/collections/c", headers: ["If-None-Match": "\"\(version1)\""])
        #expect(after.status == 200 && after.header("ETag") == "\"\(version2)\"")
        #expect(after.object["version"] as? String == version2)
        #expect(after.text.contains(#""id":"m3""#))
    }

    /// Reads of an unchanged snapshot are answered before a request value is built (`App.quickRead`): on one
    /// keep-alive connection, every read after the first gets the same bytes as the first, and the connection stays
    /// open; each is counted and logged as any request is; a `GET` with a body still goes the usual way.
    @Test func quickReadsKeepTheConnectionAndAreCountedAndLogged() throws {
        let server = try ServerProcess()
        let version = try #require(try server.client.put("/v1/collections/c", Self.inbox).object["version"] as? String)
        let connection = try HTTPConnection(port: server.port)
        defer { connection.close() }
        connection.sendRequest("GET", "/v1/collections/c")
        let first = try connection.readResponse()
        #expect(first.status == 200 && first.header("ETag") == "\"\(version)\"")
        for round in 0..<20 {
            connection.sendRequest("GET", "/v1/collections/c")
            let read = try connection.readResponse()
            #expect(read.status == 200 && read.body == first.body, "round \(round)")
            #expect(read.header("ETag") == first.header("ETag") && read.header("Connection") == nil, "round \(round)")
            connection.sendRequest("HEAD", "/v1/collections/c")
            let head = try connection.readResponse(method: "HEAD")
            #expect(head.status == 200 && head.header("Content-Length") == first.header("Content-Length"))
            connection.sendRequest("GET", "/v1/collections/c", headers: ["If-None-Match": "\"\(version)\""])
            #expect(try connection.readResponse().status == 304, "round \(round)")
        }
        connection.sendRequest("GET", "/v1/collections/c", body: Array("{}".utf8))
        let withBody = try connection.readResponse()
        #expect(withBody.status == 200 && withBody.body == first.body)
        #expect(!connection.isClosed(within: 0.2))

        // The first read and the one with a body took the usual way; the other 60 were answered quickly. A loop
        // adds its counts at the end of its turn, so the scrape (maybe on the other loop) may come first.
        let counts =
            ["changeserver_quick_reads_total 60\n"]
            + [("GET", 200, 22), ("HEAD", 200, 20), ("GET", 304, 20)].map { method, status, count in
                let labels = #"method="\#(method)",route="/v1/collections/{name}",status="\#(status)""#
                return "changeserver_requests_total{\(labels)} \(count)\n"
            }
        var metrics = ""
        _ = waitUntil(timeout: 10) {
            metrics = (try? server.client.get("/metrics").text) ?? ""
            return counts.allSatisfy { metrics.contains($0) }
        }
        for count in counts { #expect(metrics.contains(count), "\(count)") }
        #expect(
            waitUntil(timeout: 10) {
                server.logCount(of: " info GET /v1/collections/c 200 ") == 22
                    && server.logCount(of: " info HEAD /v1/collections/c 200 ") == 20
                    && server.logCount(of: " info GET /v1/collections/c 304 ") == 20
            })
    }

    /// A `304` says the length of the body it stands for (RFC 9110 §8.6 allows no other `Content-Length`; a cache
    /// that took `0` for the stored body's length would truncate it): snapshots read the quick way and the usual way
    /// (a token), one too large to be kept encoded, the feed's reset and changes, and the web client's files; each
    /// on one keep-alive connection that goes on reading the next answer right after it.
    @Test(arguments: [false, true]) func aNotModifiedAnswerHasTheLengthOfTheFullOne(withToken: Bool) throws {
        let server = try ServerProcess(withToken ? ["--read-token", "r", "--write-token", "w"] : [])
        let auth = withToken ? ["Authorization": "Bearer w"] : [:]
        let client = Client(port: server.port, receiveTimeout: 60)
        #expect(try client.put("/v1/collections/c", Self.inbox, headers: auth).status == 201)
        let items = (0..<20_000).map { ["id": "item-\($0)", "data": ["text": String(repeating: "x", count: 60)]] }
        #expect(
            try client.put("/v1/collections/big", ["sections": [["id": "s", "items": items]]], headers: auth).status
                == 201)
        let first = try #require(try client.get("/v1/collections/c", headers: auth).header("ETag"))
        #expect(try client.put("/v1/collections/c/items/m9", ["data": 9], headers: auth).status == 201)
        let paths = [
            "/v1/collections/c", "/v1/collections/big", "/v1/collections/c/changes",
            "/v1/collections/c/changes?since=\(first.dropFirst().dropLast())", "/v1/client/changefeed.js",
        ]
        let connection = try HTTPConnection(port: server.port, receiveTimeout: 60)
        for path in paths {
            connection.sendRequest("GET", path, headers: auth)
            let full = try connection.readResponse()
            let tag = try #require(full.header("ETag"), "\(path)")
            #expect(full.status == 200 && Int(full.header("Content-Length") ?? "") == full.body.count, "\(path)")
            connection.sendRequest("GET", path, headers: auth.merging(["If-None-Match": tag]) { $1 })
            let notModified = try connection.readResponse()
            #expect(notModified.status == 304 && notModified.header("ETag") == tag, "\(path)")
            #expect(notModified.header("Content-Length") == full.header("Content-Length"), "\(path)")
            #expect(notModified.headerLineCounts["content-length"] == 1 && notModified.header("Content-Type") == nil)
            #expect(notModified.header("Cache-Control") == full.header("Cache-Control"), "\(path)")
            #expect(notModified.header("Vary") == full.header("Vary"), "\(path)")
            connection.sendRequest("GET", path, headers: auth)
            let again = try connection.readResponse()
            #expect(again.status == 200 && again.body == full.body, "the next answer on the connection: \(path)")
        }
        #expect(try client.get("/v1/collections/big", headers: auth).body.count > 1 << 20, "not kept encoded")
    }

    @Test func replaceDiffsAndNoOpKeepsVersion() throws {
        let server = try ServerProcess()
        let version1 = try #require(try server.client.put("/v1/collections/c", Self.inbox).object["version"] as? String)
        let same = try server.client.put("/v1/collections/c", Self.inbox)
        #expect(same.status == 200)
        #expect(same.object["version"] as? String == version1)
        let unchanged = same.object["changes"] as? [String: Any]
        #expect(unchanged?["from"] as? String == version1 && unchanged?["to"] as? String == version1)

        let replaced = try server.client.put(
            "/v1/collections/c",
            [
                "sections": [
                    ["id": "later"],
                    ["id": "today", "data": ["title": "Today", "a": 1], "items": [["id": "m2"], ["id": "m3"]]],
                ]
            ])
        #expect(replaced.status == 200)
        let version2 = try #require(replaced.object["version"] as? String)
        #expect(version2 == version1.dropLast() + "2")
        let changes = try #require(replaced.object["changes"] as? [String: Any])
        let items = try #require(changes["items"] as? [String: Any])
        #expect((items["deleted"] as? [[String: Any]])?.first?["id"] as? String == "m1")
        #expect((items["inserted"] as? [[String: Any]])?.first?["id"] as? String == "m3")
        let sections = try #require(changes["sections"] as? [String: Any])
        #expect((sections["moved"] as? [[String: Any]])?.count == 1)
    }

    @Test func listIsSortedWithCounts() throws {
        let server = try ServerProcess()
        _ = try server.client.put("/v1/collections/zeta", ["sections": []])
        _ = try server.client.put("/v1/collections/alpha", Self.inbox)
        let list = try server.client.get("/v1/collections")
        #expect(list.status == 200)
        let rows = try #require(list.object["collections"] as? [[String: Any]])
        #expect(rows.map { $0["name"] as? String } == ["alpha", "zeta"])
        #expect(rows[0]["sections"] as? Int == 2 && rows[0]["items"] as? Int == 2)
        #expect(rows[1]["sections"] as? Int == 0 && rows[1]["items"] as? Int == 0)
    }

    @Test func deleteThenRecreateHasNewEpoch() throws {
        let server = try ServerProcess()
        let first = try #require(try server.client.put("/v1/collections/c", Self.inbox).object["version"] as? String)
        #expect(try server.client.request("DELETE", "/v1/collections/c").status == 204)
        #expect(try server.client.get("/v1/collections/c").status == 404)
        let missing = try server.client.request("DELETE", "/v1/collections/c")
        #expect(missing.status == 404)
        #expect(missing.errorCode == "collection_not_found")
        let second = try #require(try server.client.put("/v1/collections/c", Self.inbox).object["version"] as? String)
        #expect(first.split(separator: ".")[0] != second.split(separator: ".")[0])
    }

    @Test func ifMatchGuardsMutations() throws {
        let server = try ServerProcess()
        let version = try #require(try server.client.put("/v1/collections/c", Self.inbox).object["version"] as? String)
        let stale = try server.client.put(
            "/v1/collections/c", ["sections": []], headers: ["If-Match": "\"\(version)0\""])
        #expect(stale.status == 412)
        #expect(stale.errorCode == "precondition_failed")
        #expect(try server.client.get("/v1/collections/c").object["version"] as? String == version)
        let fresh = try server.client.put(
            "/v1/collections/c", ["sections": []], headers: ["If-Match": "\"\(version)\""])
        #expect(fresh.status == 200)
        let onlyCreate = try server.client.put("/v1/collections/c", ["sections": []], headers: ["If-None-Match": "*"])
        #expect(onlyCreate.status == 412)
        let missing = try server.client.put("/v1/collections/new", ["sections": []], headers: ["If-Match": "*"])
        #expect(missing.status == 412)
        let deleteStale = try server.client.request(
            "DELETE", "/v1/collections/c", headers: ["If-Match": "\"\(version)\""])
        #expect(deleteStale.status == 412)
    }

    @Test func dataIsCanonicalised() throws {
        let server = try ServerProcess()
        let body =
            #"{"sections":[{"id":"s","data":{ "b" : [1, 1.0, 1.5, -0.0, 1e300, "é\u0001"], "a": {"z": true, "y": null}},"items":[]}]}"#
        let created = try server.client.request(
            "PUT", "/v1/collections/c", headers: ["Content-Type": "application/json; charset=utf-8"],
            body: Array(body.utf8))
        #expect(created.status == 201)
        let snapshot = try server.client.get("/v1/collections/c").text
        #expect(
            snapshot.contains(#""data":{"a":{"y":null,"z":true},"b":[1,1.0,1.5,-0.0,1e+300,"é\u0001"]}"#), "\(snapshot)"
        )
    }
}
