import Foundation
import Model
import Testing

@testable import ChangeServer

/// The feed's answers as HTTP caches see them (API.md, "The feed through HTTP caches"): `next` on every `200`,
/// `Cache-Control` with and without `--read-token`, entity tags and `304`, and the cursor of empty answers.
@Suite struct InProcessFeedCachingTests {
    private static let inbox = #"{"sections": [{"id": "s", "items": [{"id": "a", "data": 1}]}]}"#

    private func server(_ arguments: [String] = [], token: String? = nil) throws -> (InProcessServer, String) {
        let server = try InProcessServer(arguments)
        let auth = token.map { [("Authorization", "Bearer \($0)")] } ?? []
        let created = server.send("PUT", "/v1/collections/inbox", body: Self.inbox, headers: auth)
        #expect(created.status == 201)
        return (server, try #require(created.json["version"] as? String))
    }

    @Test func everyOKAnswerCarriesNextAndIsSharedBriefly() throws {
        let (server, first) = try server()
        let reset = server.send("GET", "/v1/collections/inbox/changes?timeout=9")
        #expect(reset.json["next"] as? String == "since=\(first)&timeout=9")
        #expect(reset.header("Cache-Control") == "public, max-age=2, stale-while-revalidate=2")
        #expect(reset.header("ETag") == "\"reset-\(first)\"")
        let defaulted = server.send("GET", "/v1/collections/inbox/changes")
        #expect(defaulted.json["next"] as? String == "since=\(first)&timeout=25")

        let mutation = server.send("PUT", "/v1/collections/inbox/items/b", body: #"{"data": 2}"#)
        let second = try #require(mutation.json["version"] as? String)
        let changes = server.send("GET", "/v1/collections/inbox/changes?since=\(first)&timeout=500&cursor=4")
        #expect(changes.status == 200)
        #expect(changes.json["next"] as? String == "since=\(second)&timeout=300", "no cursor; timeout clamped")
        #expect(changes.header("Cache-Control") == "public, max-age=60")
        #expect(changes.header("ETag") == "\"\(first)-\(second)\"")

        let empty = server.send("GET", "/v1/collections/inbox/changes?since=\(second)&timeout=0&cursor=41")
        let next = try #require(empty.json["next"] as? String)
        let cursor = try #require(next.split(separator: "=").last.flatMap { Int64($0) })
        #expect(next == "since=\(second)&timeout=0&cursor=\(cursor)")
        #expect(cursor > 41)
        #expect(empty.header("Cache-Control") == "public, max-age=2")
        #expect(empty.header("ETag") == "\"\(second)-\(second)-\(cursor)\"")
    }

    @Test func followingNextNeverAsksTheSameURLTwice() throws {
        let (server, version) = try server()
        var query = "since=\(version)&timeout=0"
        var seen: Set<String> = [query]
        for _ in 0..<20 {
            let answer = server.send("GET", "/v1/collections/inbox/changes?\(query)")
            #expect(answer.status == 200)
            query = try #require(answer.json["next"] as? String)
            #expect(seen.insert(query).inserted, "\(query) asked again")
        }
        #expect(seen.count == 21)
    }

    /// A `404` of the feed is shared briefly too, so that it replaces what a cache held for the URL (a deleted
    /// collection's last reset, which nginx went on serving while `no-store` answers left it in place).
    @Test func goneAndMissingAreSharedBrieflyOtherErrorsAreNotStored() throws {
        let (server, _) = try server()
        let gone = server.send("GET", "/v1/collections/inbox/changes?since=other.1")
        #expect(gone.status == 410)
        #expect(gone.header("Cache-Control") == "public, max-age=2")
        let bad = server.send("GET", "/v1/collections/inbox/changes?since=other.1&cursor=x")
        #expect(bad.status == 400)
        #expect(bad.header("Cache-Control") == "no-store")
        for cursor in ["-1", "1.5", "", "9007199254740993", "99999999999999999999"] {
            let answer = server.send("GET", "/v1/collections/inbox/changes?since=other.1&cursor=\(cursor)")
            #expect(answer.errorCode == "bad_request", "\(cursor)")
        }
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=other.1&cursor=9007199254740992").status == 410)
        for path in ["/v1/collections/ghost/changes", "/v1/views/ghost/changes"] {
            let missing = server.send("GET", path)
            #expect(missing.status == 404 && missing.header("Cache-Control") == "public, max-age=2", "\(path)")
            #expect(missing.header("Vary") == "Accept", "\(path)")
        }
        let badTimeout = server.send("GET", "/v1/collections/inbox/changes?since=other.1&timeout=x")
        #expect(badTimeout.status == 400 && badTimeout.header("Cache-Control") == "no-store")
        #expect(server.send("DELETE", "/v1/collections/inbox").status == 204)
        let deleted = server.send("GET", "/v1/collections/inbox/changes")
        #expect(deleted.status == 404 && deleted.header("Cache-Control") == "public, max-age=2")
    }

    /// A `410` for a version ahead of the current one is never stored: its URL is the `next` every client polls
    /// once the collection gets there, and any client could have a cache keep a `410` for it (the clients then
    /// reset, again and again). A `410` for a version behind, or of another epoch, is still shared briefly.
    @Test func aCursorAheadIsRefusedWithoutBeingStored() throws {
        let (server, text) = try server()
        let first = try #require(Version(text))
        let ahead = "\(first.epoch).\(first.seq + 1)"
        for since in [ahead, "\(first.epoch).\(first.seq + 1000)", "\(first.epoch).99999999999999999999999"] {
            let answer = server.send("GET", "/v1/collections/inbox/changes?since=\(since)&timeout=25")
            #expect(answer.status == 410, "\(since)")
            #expect(answer.errorCode == "cursor_expired")
            #expect(answer.header("Cache-Control") == "no-store", "\(since)")
        }
        #expect(server.send("PUT", "/v1/collections/inbox/items/b", body: #"{"data": 2}"#).status == 201)
        // Now that version is the current one: its poll is held (answered `.later`), not refused.
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=\(ahead)&timeout=25").status != 410)
        let behind = server.send("GET", "/v1/collections/inbox/changes?since=other.1")
        #expect(behind.status == 410 && behind.header("Cache-Control") == "public, max-age=2")
    }

    @Test func withReadTokenEveryFeedAnswerIsPrivate() throws {
        let (server, first) = try server(["--read-token", "r"], token: "r")
        let auth = [("Authorization", "Bearer r")]
        _ = server.send("PUT", "/v1/collections/inbox/items/b", body: #"{"data": 2}"#, headers: auth)
        for query in ["", "?since=\(first)", "?since=other.1"] {
            let answer = server.send("GET", "/v1/collections/inbox/changes\(query)", headers: auth)
            #expect(answer.header("Cache-Control") == "private, no-store", "\(query)")
        }
        // Errors and preflights too, as API.md says of every feed answer under a read token.
        let errors = [
            server.send("GET", "/v1/collections/inbox/changes?since=zz", headers: auth),
            server.send("GET", "/v1/collections/ghost/changes", headers: auth),
            server.send("GET", "/v1/collections/inbox/changes"),
            server.send("OPTIONS", "/v1/collections/inbox/changes"),
        ]
        #expect(errors.map(\.status) == [400, 404, 401, 204])
        for answer in errors { #expect(answer.header("Cache-Control") == "private, no-store", "\(answer.status)") }
        let stream = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(first)", headers: auth + [("Accept", "text/event-stream")])
        #expect(stream.header("Content-Type") == "text/event-stream; charset=utf-8")
        #expect(stream.header("Cache-Control") == "private, no-store")
        let changes = server.send("GET", "/v1/collections/inbox/changes?since=\(first)", headers: auth)
        #expect(changes.json["next"] is String)
    }

    @Test func ifNoneMatchOnTheSameAnswerIs304() throws {
        let (server, first) = try server()
        let mutation = server.send("PUT", "/v1/collections/inbox/items/b", body: #"{"data": 2}"#)
        let second = try #require(mutation.json["version"] as? String)
        let changes = server.send("GET", "/v1/collections/inbox/changes?since=\(first)")
        let tag = try #require(changes.header("ETag"))
        let revalidated = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(first)", headers: [("If-None-Match", "W/\(tag)")])
        #expect(revalidated.status == 304)
        #expect(revalidated.header("ETag") == tag)
        _ = server.send("PUT", "/v1/collections/inbox/items/c", body: #"{"data": 3}"#)
        let moved = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(first)", headers: [("If-None-Match", tag)])
        #expect(moved.status == 200, "the collection moved on: a new answer")
        #expect(moved.json["from"] as? String == first && moved.json["to"] as? String != second)
        let reset = server.send("GET", "/v1/collections/inbox/changes")
        let resetTag = try #require(reset.header("ETag"))
        #expect(
            server.send("GET", "/v1/collections/inbox/changes", headers: [("If-None-Match", resetTag)]).status == 304)
    }

    @Test(arguments: [0, 1, 25, 300])
    func nextCursorGrowsAndCountsIntervals(timeout: Int) {
        let now: Int64 = 1_800_000_000
        let interval = now / Int64(max(timeout, 1))
        #expect(FeedCaching.nextCursor(after: nil, timeout: timeout, now: now) == interval)
        #expect(FeedCaching.nextCursor(after: interval - 5, timeout: timeout, now: now) == interval)
        #expect(FeedCaching.nextCursor(after: interval, timeout: timeout, now: now) == interval + 1)
        #expect(FeedCaching.nextCursor(after: interval + 7, timeout: timeout, now: now) == interval + 8)
        // The largest cursor a request may carry is followed by one it may carry too.
        let largest = FeedCaching.maximumCursor
        #expect(FeedCaching.nextCursor(after: largest - 1, timeout: timeout, now: now) == largest)
        #expect(FeedCaching.nextCursor(after: largest, timeout: timeout, now: now) == interval)
    }
}
