import Foundation
import Model
import Synchronization
import Testing

@testable import ChangeServer

/// Issue 14's route-level items, in-process: refusals decided from the headers, NUL ids, integral reals, the
/// collection limit and the list's cursor, the disk reserve.
@Suite struct InProcessHardeningTests {
    @Test func refusalsAreDecidedFromTheHeadersAlone() throws {
        let server = try InProcessServer(["--write-token", "w"])
        let headersOnly = Request(
            method: "PUT", path: "/v1/collections/c", headers: [("Content-Type", "application/json")])
        let unauthorized = server.app.screen(headersOnly)
        #expect(unauthorized.template == "/v1/collections/{name}")
        #expect(unauthorized.passed == nil)
        #expect(unauthorized.refusal?.status == .unauthorized)
        var authorized = headersOnly
        authorized.headers.append(("authorization", "Bearer w"))
        #expect(server.app.screen(authorized).refusal == nil)
        authorized.headers[0].value = "text/plain"
        #expect(server.app.screen(authorized).refusal?.status == .unsupportedMediaType)
        #expect(server.app.screen(Request(method: "GET", path: "/nowhere")).refusal?.status == .notFound)
        #expect(server.app.screen(Request(method: "POST", path: "/healthz")).refusal?.status == .methodNotAllowed)
        #expect(server.app.screen(Request(method: "GET", path: "/healthz")).refusal == nil)
    }

    /// A request screened from its headers is not checked again with its body, except for the server's state.
    @Test func aScreenedRouteIsUsedAndTheStateCheckedAgain() throws {
        let server = try InProcessServer()
        let put = Request(
            method: "PUT", path: "/v1/collections/c", headers: [("Content-Type", "application/json")],
            body: Array(#"{"sections": [{"id": "s"}]}"#.utf8))
        let screened = server.app.screen(put)
        #expect(screened.passed == .collection("c"))
        #expect(server.answer(put, screened: screened.passed).status == 201)
        #expect(server.send("GET", "/v1/collections/c").status == 200)
        #expect(
            server.app.screen(Request(method: "GET", path: "/v1/client/changefeed.js")).passed
                == .asset("/v1/client/changefeed.js"))
        let late = server.app.screen(put)
        server.app.shutDown()
        #expect(server.answer(put, screened: late.passed).status == 503)
    }

    @Test func idsWithNULAreRefused() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/collections/c", body: #"{"sections": [{"id": "s"}]}"#).status == 201)
        let upsert = server.send("PUT", "/v1/collections/c/items/a%00b", body: #"{"data": 1}"#)
        #expect(upsert.status == 400)
        #expect(upsert.errorCode == "invalid_id")
        #expect(server.send("GET", "/v1/collections/c/items/a%00b").status == 404)
        let snapshot = server.send("GET", "/v1/collections/c").text
        #expect(!snapshot.contains("\\u0000"))
    }

    @Test func integralRealsStandForIntegers() throws {
        let server = try InProcessServer()
        #expect(
            server.send("PUT", "/v1/collections/c", body: #"{"sections": [{"id": "s"}, {"id": "t"}]}"#).status == 201)
        let inserted = server.send(
            "POST", "/v1/collections/c/mutations",
            body: #"{"ops": [{"op": "insertItems", "at": [1.0, 0.0], "items": [{"id": "a"}, {"id": "b"}]}]}"#)
        #expect(inserted.status == 200)
        let moved = server.send("PUT", "/v1/collections/c/items/b", body: #"{"data": 1, "index": 0e0}"#)
        #expect(moved.status == 200)
        #expect(server.send("GET", "/v1/collections/c/items/b").json["at"] as? [Int] == [1, 0])
        for fractional in ["0.5", "1e400", "9.3e18"] {
            let refused = server.send("PUT", "/v1/collections/c/items/b", body: #"{"index": \#(fractional)}"#)
            #expect(refused.status == 400, "index \(fractional)")
        }
    }

    @Test func collectionsAreLimitedAndListedByPages() throws {
        let server = try InProcessServer(["--max-collections", "5"])
        for name in ["e", "a", "d", "b", "c"] {
            #expect(server.send("PUT", "/v1/collections/\(name)", body: #"{"sections": []}"#).status == 201)
        }
        let refused = server.send("PUT", "/v1/collections/f", body: #"{"sections": []}"#)
        #expect(refused.status == 409)
        #expect(refused.errorCode == "too_many_collections")
        #expect(server.send("PUT", "/v1/collections/a", body: #"{"sections": [{"id": "s"}]}"#).status == 200)
        var names: [String] = []
        var cursor: String? = nil
        var pages = 0
        repeat {
            let page = server.send("GET", "/v1/collections?limit=2" + (cursor.map { "&after=\($0)" } ?? ""))
            #expect(page.status == 200)
            names += (page.json["collections"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            cursor = page.json["next"] as? String
            pages += 1
        } while cursor != nil && pages < 10
        #expect(names == ["a", "b", "c", "d", "e"])
        #expect(pages == 3)
        #expect(server.send("GET", "/v1/collections").json["next"] == nil)
        #expect(server.send("GET", "/v1/collections?limit=0").status == 400)
        #expect(server.send("GET", "/v1/collections?limit=x").status == 400)
        #expect(server.send("GET", "/v1/collections?after=%2F").status == 400)
        #expect(server.send("DELETE", "/v1/collections/e").status == 204)
        #expect(server.send("PUT", "/v1/collections/f", body: #"{"sections": []}"#).status == 201)
    }

    @Test func viewsAreLimitedAndListedByPages() throws {
        let server = try InProcessServer(["--max-views", "5"])
        for name in ["e", "a", "d", "b", "c"] {
            #expect(server.send("PUT", "/v1/views/\(name)", body: #"{"source": "tasks"}"#).status == 201)
        }
        let refused = server.send("PUT", "/v1/views/f", body: #"{"source": "tasks"}"#)
        #expect(refused.status == 409)
        #expect(refused.errorCode == "too_many_views")
        #expect(refused.text.contains("--max-views"))
        #expect(server.send("GET", "/v1/views/f").status == 404)
        #expect(server.send("PUT", "/v1/views/a", body: #"{"source": "other"}"#).status == 200)
        var rows: [[String: Any]] = []
        var cursor: String? = nil
        var pages = 0
        repeat {
            let page = server.send("GET", "/v1/views?limit=2" + (cursor.map { "&after=\($0)" } ?? ""))
            #expect(page.status == 200)
            rows += page.json["views"] as? [[String: Any]] ?? []
            cursor = page.json["next"] as? String
            pages += 1
        } while cursor != nil && pages < 10
        #expect(rows.compactMap { $0["name"] as? String } == ["a", "b", "c", "d", "e"])
        #expect(rows.first?["source"] as? String == "other")
        #expect(pages == 3)
        #expect((server.send("GET", "/v1/views?after=c").json["views"] as? [Any])?.count == 2)
        #expect(server.send("GET", "/v1/views").json["next"] == nil)
        #expect(server.send("GET", "/v1/views?limit=10001").status == 400)
        let badCursor = server.send("GET", "/v1/views?after=%2F")
        #expect(badCursor.status == 400)
        #expect(badCursor.text.contains("a view name"))
        #expect(server.send("DELETE", "/v1/views/e").status == 204)
        #expect(server.send("PUT", "/v1/views/f", body: #"{"source": "tasks"}"#).status == 201)
    }

    /// A page is the registry at one moment: while "a" is deleted and created again, the first page of one holds
    /// "a" or "b", never nothing (a page whose entries were looked up one by one after its names could come out
    /// empty, without `next`, and end a listing early: thousands of these 20,000 pages were).
    @Test func aPageIsNeverEmptiedByAConcurrentDeletion() throws {
        let registry = Registry()
        func entry(_ name: String) throws -> CollectionEntry {
            CollectionEntry(name: name, content: try VersionedCollection(epoch: "abcdefghijkl", sections: []))
        }
        _ = registry.insert(try entry("b"))
        let a = try entry("a")
        let stop = Mutex(false)
        let churn = Thread {
            while !stop.withLock({ $0 }) {
                _ = registry.insert(a)
                _ = registry.remove(a)
            }
        }
        churn.start()
        var empty = 0
        for _ in 0..<20000 where registry.page(after: nil, limit: 1).entries.isEmpty { empty += 1 }
        stop.withLock { $0 = true }
        #expect(empty == 0)
    }

    @Test func writesAreRefusedBelowTheDiskReserve() throws {
        let server = try InProcessServer(["--disk-reserve-bytes", String(1 << 50)])
        let refused = server.send("PUT", "/v1/collections/c", body: #"{"sections": []}"#)
        #expect(refused.status == 503)
        #expect(refused.errorCode == "insufficient_storage")
        #expect(refused.header("Retry-After") != nil)
        #expect(server.send("GET", "/v1/collections").status == 200)
        #expect(server.send("DELETE", "/v1/collections/c").status == 404)
        #expect(server.send("GET", "/metrics").text.contains("changeserver_writes_refused_disk_total 1"))
    }

    @Test func newFlagsParse() throws {
        let config = try #require(
            try Config.parse(
                arguments: [
                    "--max-body-memory", "1000", "--max-body-bytes", "1000", "--max-collections", "7",
                    "--disk-reserve-bytes", "0",
                ],
                environment: ["CHANGESERVER_MAX_CONNECTIONS_PER_ADDRESS": "9"]
            ).config)
        #expect(config.maxBodyMemory == 1000)
        #expect(config.maxCollections == 7)
        #expect(config.diskReserveBytes == 0)
        #expect(config.maxConnectionsPerAddress == 9)
        #expect(throws: Config.UsageError.self) {
            try Config.parse(arguments: ["--max-collections", "0"], environment: [:]).config
        }
        // A body over all the memory for bodies could never be taken: refused at start, not `503` for good. The
        // default memory grows with the largest body.
        #expect(throws: Config.UsageError.self) {
            try Config.parse(arguments: ["--max-body-memory", "1000"], environment: [:]).config
        }
        #expect(throws: Config.UsageError.self) {
            try Config.parse(arguments: [], environment: ["CHANGESERVER_MAX_BODY_MEMORY": "1000"]).config
        }
        let large = try #require(
            try Config.parse(arguments: ["--max-body-bytes", "300000000"], environment: [:]).config)
        #expect(large.maxBodyMemory == 300_000_000)
        #expect(Config.help.contains("--disk-reserve-bytes"))
    }

    @Test func limitsFitTheOpenFiles() {
        var config = Config()
        config.threads = 2
        let small = config.fitted(toOpenFiles: 1024, loops: 2)
        #expect(small.config.maxConnections == 1024 - Config.reservedDescriptors(threads: 2))
        #expect(small.config.maxHeldPolls == small.config.maxConnections - max(16, small.config.maxConnections / 20))
        #expect(small.note != nil)
        let large = config.fitted(toOpenFiles: 1 << 20, loops: 2)
        #expect(large.config.maxConnections == config.maxConnections)
        #expect(large.config.maxHeldPolls == config.maxHeldPolls)
        #expect(large.note == nil)
        // With 16 connections or fewer the reserve for other requests would leave no poll at all: one is held.
        config.maxConnections = 16
        #expect(config.fitted(toOpenFiles: 1 << 20, loops: 2).config.maxHeldPolls == 1)
    }
}
