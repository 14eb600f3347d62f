import Foundation
import Testing

@testable import ChangeServer

/// Every route and every error of the contract, called in-process (no sockets): the fast set
/// (`swift test --filter InProcess`).
@Suite struct InProcessRouteTests {
    private static let inbox = #"{"sections": [{"id": "s", "items": [{"id": "a", "data": 1}, {"id": "b"}]}]}"#

    private func serverWithInbox(_ arguments: [String] = []) throws -> (InProcessServer, String) {
        let server = try InProcessServer(arguments)
        let created = server.send("PUT", "/v1/collections/inbox", body: Self.inbox)
        #expect(created.status == 201)
        return (server, try #require(created.json["version"] as? String))
    }

    /// Every read says how caches may keep it: a snapshot (and its `304`) is revalidated before every use, feed
    /// answers carry their own lifetimes, everything else is never stored. Without a word, a CDN kept snapshots for
    /// a lifetime of its own and served old versions.
    @Test func readsSayHowCachesMayKeepThem() throws {
        let (server, version) = try serverWithInbox()
        let snapshot = server.send("GET", "/v1/collections/inbox")
        #expect(snapshot.header("Cache-Control") == "no-cache")
        let notModified = server.send("GET", "/v1/collections/inbox", headers: [("If-None-Match", "\"\(version)\"")])
        #expect(notModified.status == 304 && notModified.header("Cache-Control") == "no-cache")
        #expect(server.send("PUT", "/v1/views/v", body: #"{"source": "inbox"}"#).status == 201)
        #expect(server.send("GET", "/v1/views/v").header("Cache-Control") == "no-cache")
        for path in [
            "/v1/collections", "/v1/views", "/v1/collections/inbox/items/a", "/healthz", "/metrics",
            "/v1/collections/nope", "/v1/collections/inbox/items/nope", "/v1/views/nope", "/v1/nothing",
        ] {
            #expect(server.send("GET", path).header("Cache-Control") == "no-store", "\(path)")
            #expect(server.send("HEAD", path).header("Cache-Control") == "no-store", "HEAD \(path)")
        }
        #expect(
            server.send("GET", "/v1/collections/inbox/changes").header("Cache-Control")
                == "public, max-age=2, stale-while-revalidate=2")
        // The feed's URL answers a stream to `Accept: text/event-stream`: every answer of it varies with `Accept`.
        let changes = server.send("GET", "/v1/collections/inbox/changes?since=\(version)&timeout=0")
        let expired = server.send("GET", "/v1/collections/inbox/changes?since=\(version.split(separator: ".")[0]).99")
        let missing = server.send("GET", "/v1/collections/nope/changes")
        #expect(expired.status == 410 && missing.status == 404)
        for answer in [changes, expired, missing, server.send("GET", "/v1/views/v/changes")] {
            #expect(answer.header("Vary") == "Accept", "\(answer.status)")
        }
        #expect(server.send("PUT", "/v1/collections/inbox/items/y", body: #"{"data": 1}"#).status == 201)
        let moved = server.send("GET", "/v1/collections/inbox/changes?since=\(version)")
        let tag = try #require(moved.header("ETag"))
        let feedNotModified = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(version)", headers: [("If-None-Match", tag)])
        #expect(feedNotModified.status == 304 && feedNotModified.header("Vary") == "Accept")
        #expect(ServerSentEvents.headers(server.app.feedCaching).contains { $0 == ("Vary", "Accept") })
        // A write's answer is not marked: caches do not store answers to PUT, POST or DELETE.
        #expect(
            server.send("PUT", "/v1/collections/inbox/items/z", body: #"{"data": 1}"#).header("Cache-Control") == nil)
    }

    @Test func serviceRoutes() throws {
        let server = try InProcessServer()
        #expect(server.send("GET", "/healthz").text == #"{"status":"ok"}"#)
        let metrics = server.send("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.text.contains("\nchangeserver_build_info{version=\"\(Release.version)\"} 1\n"))
        #expect(server.send("GET", "/nowhere").errorCode == "route_not_found")
        #expect(server.send("GET", "/v1/collections/a/b/c/d").status == 404)
    }

    @Test func createReadReplaceListDelete() throws {
        let (server, version) = try serverWithInbox()
        let snapshot = server.send("GET", "/v1/collections/inbox")
        #expect(snapshot.status == 200)
        #expect(snapshot.header("ETag") == "\"\(version)\"")
        #expect(
            server.send("GET", "/v1/collections/inbox", headers: [("If-None-Match", "\"\(version)\"")]).status == 304)
        let replaced = server.send("PUT", "/v1/collections/inbox", body: #"{"sections": [{"id": "s"}]}"#)
        #expect(replaced.status == 200)
        let items = ((replaced.json["changes"] as? [String: Any])?["items"] as? [String: Any])?["deleted"] as? [Any]
        #expect(items?.count == 2)
        let list = server.send("GET", "/v1/collections").json["collections"] as? [[String: Any]]
        #expect(list?.first?["name"] as? String == "inbox")
        #expect(server.send("DELETE", "/v1/collections/inbox").status == 204)
        #expect(server.send("GET", "/v1/collections/inbox").errorCode == "collection_not_found")
        #expect(server.send("DELETE", "/v1/collections/inbox").errorCode == "collection_not_found")
    }

    /// A snapshot is encoded once per version and shared by the reads at that version.
    @Test func snapshotsAreEncodedOncePerVersion() throws {
        let (server, version) = try serverWithInbox()
        let entry = try #require(server.app.registry.entry("inbox"))
        #expect(entry.encodedSnapshot.current == nil)
        let first = server.send("GET", "/v1/collections/inbox")
        #expect(entry.encodedSnapshot.current?.version.description == version)
        #expect(entry.encodedSnapshot.current?.json == first.body)
        let again = server.send("GET", "/v1/collections/inbox")
        #expect(again.body == first.body)
        // One response per version, shared by its reads (and one `304`).
        #expect(first.share != nil && again.share == first.share)
        let notModified = server.send("GET", "/v1/collections/inbox", headers: [("If-None-Match", "\"\(version)\"")])
        let notModifiedAgain = server.send(
            "GET", "/v1/collections/inbox", headers: [("If-None-Match", "\"\(version)\"")])
        #expect(notModified.status == 304 && notModified.share != nil && notModifiedAgain.share == notModified.share)
        _ = server.send("PUT", "/v1/collections/inbox/items/c", body: #"{"data": 3}"#)
        let second = server.send("GET", "/v1/collections/inbox")
        #expect(second.body != first.body)
        #expect(second.share != nil && second.share != first.share)
        #expect(second.text.contains(#""id":"c""#))
        #expect(entry.encodedSnapshot.current?.json == second.body)
    }

    @Test func badRequests() throws {
        let (server, _) = try serverWithInbox()
        #expect(server.send("PUT", "/v1/collections/x", body: "{").errorCode == "bad_json")
        #expect(
            server.send("PUT", "/v1/collections/x", body: #"{"sections": [], "extra": 1}"#).errorCode == "bad_request")
        let badName = server.send("PUT", "/v1/collections/-x", body: #"{"sections": []}"#)
        #expect(badName.errorCode == "invalid_name")
        #expect(badName.text.contains("A collection name is"))
        let badViewName = server.send("PUT", "/v1/views/_v", body: #"{"source": "inbox"}"#)
        #expect(badViewName.errorCode == "invalid_name")
        #expect(badViewName.text.contains("A view name is"))
        #expect(server.send("GET", "/v1/collections/a%zz").errorCode == "bad_request")
        let form = server.send(
            "PUT", "/v1/collections/x", body: "a=1", headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(form.status == 415)
        #expect(form.errorCode == "unsupported_media_type")
        // A compressed body is refused for its coding, not read as JSON that is not; `identity` is no coding.
        let gzip = server.send(
            "PUT", "/v1/collections/x", body: #"{"sections": []}"#, headers: [("Content-Encoding", "gzip")])
        #expect(gzip.status == 415 && gzip.errorCode == "unsupported_media_type" && gzip.text.contains("gzip"))
        #expect(server.send("GET", "/v1/collections/x").status == 404)
        // JSON is UTF-8: another charset is refused rather than read as UTF-8 regardless.
        for charset in ["latin1", "\"utf-16\"", "ISO-8859-1", ""] {
            let other = server.send(
                "PUT", "/v1/collections/x", body: #"{"sections": []}"#,
                headers: [("Content-Type", "application/json; charset=\(charset)")])
            #expect(other.status == 415 && other.errorCode == "unsupported_media_type", "\(charset)")
            #expect(other.text.contains("send charset=utf-8 (or us-ascii) or none"))
        }
        // Every Content-Type line counts: the first had decided, and text/plain after application/json passed.
        let two = server.send(
            "PUT", "/v1/collections/x", body: #"{"sections": []}"#,
            headers: [("Content-Type", "application/json"), ("content-type", "text/plain")])
        #expect(two.status == 415 && two.errorCode == "unsupported_media_type" && two.text.contains("text/plain"))
        #expect(server.send("GET", "/v1/collections/x").status == 404)
        let identity = server.send(
            "PUT", "/v1/collections/x", body: #"{"sections": []}"#,
            headers: [
                ("Content-Encoding", "Identity"), ("Content-Type", "Application/JSON ; Charset=\"UTF-8\""),
                ("Content-Type", "application/json"),
            ])
        #expect(identity.status == 201)
        let ascii = server.send(
            "PUT", "/v1/collections/y", body: #"{"sections": []}"#,
            headers: [("Content-Type", "application/json; charset=US-ASCII")])
        #expect(ascii.status == 201)
        let unknownOp = server.send(
            "POST", "/v1/collections/inbox/mutations", body: #"{"ops": [{"op": "frobnicate"}]}"#)
        #expect(unknownOp.status == 400)
        #expect(unknownOp.errorCode == "unknown_op")
        #expect((unknownOp.json["error"] as? [String: Any])?["op"] as? Int == 0)
        #expect(server.send("POST", "/v1/collections/nope/mutations", body: #"{"ops": []}"#).status == 404)
    }

    @Test func rejectedMutationsChangeNothing() throws {
        let (server, version) = try serverWithInbox()
        let duplicate = server.send(
            "POST", "/v1/collections/inbox/mutations",
            body:
                #"{"ops": [{"op": "deleteItems", "items": ["b"]}, {"op": "insertItems", "at": [0, 0], "items": [{"id": "a"}]}]}"#
        )
        #expect(duplicate.status == 409)
        #expect(duplicate.errorCode == "duplicate_id")
        #expect((duplicate.json["error"] as? [String: Any])?["op"] as? Int == 1)
        let badID = server.send("PUT", "/v1/collections/inbox", body: #"{"sections": [{"id": ""}]}"#)
        #expect(badID.status == 400)
        #expect(badID.errorCode == "invalid_id")
        #expect(server.send("GET", "/v1/collections/inbox").json["version"] as? String == version)
    }

    @Test func preconditions() throws {
        let (server, version) = try serverWithInbox()
        let body = #"{"ops": [{"op": "updateItems", "items": [{"id": "a", "data": 2}]}]}"#
        let stale = server.send(
            "POST", "/v1/collections/inbox/mutations", body: body, headers: [("If-Match", "\"x.1\"")])
        #expect(stale.status == 412)
        #expect(stale.errorCode == "precondition_failed")
        // The current version, for a retry that needs no other request.
        #expect(stale.json["current"] as? String == version)
        let weak = server.send(
            "POST", "/v1/collections/inbox/mutations", body: body, headers: [("If-Match", "W/\"\(version)\"")])
        #expect(weak.status == 412)
        #expect(weak.text.contains("holds only weak tags"))
        // Named too when no tag could match: a front that weakens ETags makes every write that sends one back fail so.
        #expect(weak.json["current"] as? String == version)
        let empty = server.send("POST", "/v1/collections/inbox/mutations", body: body, headers: [("If-Match", "")])
        #expect(empty.status == 412)
        #expect(empty.text.contains("it is empty"))
        let weakItem = server.send(
            "PUT", "/v1/collections/inbox/items/a", body: #"{"data": 3}"#, headers: [("If-Match", "W/\"\(version)\"")])
        #expect(weakItem.status == 412 && weakItem.json["current"] as? String == version)
        let missing = server.send(
            "PUT", "/v1/collections/none/items/a", body: #"{"data": 3}"#, headers: [("If-Match", "W/\"\(version)\"")])
        #expect(missing.status == 412 && missing.json["current"] == nil)
        let strong = server.send(
            "POST", "/v1/collections/inbox/mutations", body: body, headers: [("If-Match", "W/\"x.1\", \"\(version)\"")])
        #expect(strong.status == 200)
        let createOnly = server.send(
            "PUT", "/v1/collections/inbox", body: #"{"sections": []}"#, headers: [("If-None-Match", "*")])
        #expect(createOnly.status == 412 && createOnly.json["current"] as? String != nil)
        #expect(
            server.send("PUT", "/v1/collections/fresh", body: #"{"sections": []}"#, headers: [("If-None-Match", "*")])
                .status == 201)
    }

    /// A condition that is neither `*` nor a list of versions can never match one: on a write it is `400` and
    /// changes nothing. Read as a list, `If-None-Match: "*"` (a tag, not the wildcard), `*;q=1` or `W/*` had let
    /// the create-only write it was to stop replace the content.
    @Test(arguments: [
        #""*""#, "W/*", "*;", "*;q=1", "* *", "**", "*x", "(*)", "\u{0B}*", "*\u{0C}", "\u{A0}*", "\"unterminated",
        "\u{01}", #""a" "b""#, "*\rX: y", "", " ", "E.055", #""E.3"x"#, #"W/"E.3"#, "w/\"E.3\"",
    ])
    func aConditionThatNamesNoVersionIs400(value: String) throws {
        let (server, version) = try serverWithInbox()
        let replace = #"{"sections": [{"id": "x"}]}"#
        for header in ["If-None-Match", "If-Match"] where header == "If-None-Match" || !value.allSatisfy({ $0 == " " })
        {
            let answer = server.send("PUT", "/v1/collections/inbox", body: replace, headers: [(header, value)])
            #expect(answer.status == 400, "\(header): \(value)")
            #expect(answer.errorCode == "bad_request")
            #expect(answer.text.contains("\(header) must be * or a list of versions"))
        }
        #expect(server.send("GET", "/v1/collections/inbox").json["version"] as? String == version)
    }

    /// The forms that name versions are taken as before: `*`, quoted, weak, without quotes, in lists with empty
    /// elements and spaces.
    @Test func theFormsThatNameVersionsAreTaken() throws {
        let (server, version) = try serverWithInbox()
        let body = #"{"ops": [{"op": "updateItems", "items": [{"id": "a", "data": 2}]}]}"#
        let path = "/v1/collections/inbox/mutations"
        #expect(server.send("POST", path, body: body, headers: [("If-None-Match", #"W/"\#(version)""#)]).status == 412)
        #expect(server.send("POST", path, body: body, headers: [("If-None-Match", " , \"zz.1\" ,,")]).status == 200)
        #expect(server.send("POST", path, body: body, headers: [("If-Match", "*")]).status == 200)
        let current = try #require(server.send("GET", "/v1/collections/inbox").json["version"] as? String)
        #expect(server.send("POST", path, body: body, headers: [("If-Match", "\t\(current)\t")]).status == 200)
        #expect(
            server.send(
                "PUT", "/v1/collections/new", body: #"{"sections": []}"#, headers: [("If-None-Match", "*, \"a.1\"")]
            ).status == 201)
        #expect(server.send("POST", path, body: body, headers: [("If-Match", ", ,")]).status == 412)
    }

    /// A list header may come as several lines, which mean what their joined line means (RFC 9110 §5.3): a
    /// later line's tag counts as much as the first's.
    @Test func everyLineOfAListHeaderCounts() throws {
        let (server, version) = try serverWithInbox()
        let body = #"{"ops": [{"op": "updateItems", "items": [{"id": "a", "data": 2}]}]}"#
        let refused = server.send(
            "POST", "/v1/collections/inbox/mutations", body: body,
            headers: [("If-None-Match", "\"zz.1\""), ("If-None-Match", "\"\(version)\"")])
        #expect(refused.status == 412)
        #expect(server.send("GET", "/v1/collections/inbox").json["version"] as? String == version)
        let notModified = server.send(
            "GET", "/v1/collections/inbox",
            headers: [("If-None-Match", "\"zz.1\""), ("if-none-match", "\"\(version)\"")])
        #expect(notModified.status == 304)
        let taken = server.send(
            "POST", "/v1/collections/inbox/mutations", body: body,
            headers: [("If-Match", "\"zz.1\""), ("If-Match", "\"\(version)\"")])
        #expect(taken.status == 200)
        let feed = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(version)&timeout=0",
            headers: [("If-None-Match", "\"zz\""), ("If-None-Match", try #require(taken.header("ETag")))])
        #expect(feed.status == 200)
        let accept = Request(
            method: "GET", path: "/v1/collections/inbox/changes",
            headers: [("Accept", "application/json"), ("Accept", "text/event-stream")])
        #expect(App.acceptsEventStream(accept))
        let script = server.send("GET", "/v1/client/changefeed.js")
        let scriptTag = try #require(script.header("ETag"))
        // `If-None-Match` compares weakly (RFC 9110 §13.1.2): `W/` before the file's tag names it too.
        for lines in [[#""x""#, "*"], [#""x""#, scriptTag], ["W/" + scriptTag]] {
            let revalidated = server.send(
                "GET", "/v1/client/changefeed.js", headers: lines.map { ("If-None-Match", $0) })
            #expect(revalidated.status == 304, "\(lines)")
        }
        let otherTag = server.send("GET", "/v1/client/changefeed.js", headers: [("If-None-Match", #"W/"x""#)])
        #expect(otherTag.status == 200 && !otherTag.body.isEmpty)
        let coded = server.send(
            "PUT", "/v1/collections/x", body: #"{"sections": []}"#,
            headers: [("Content-Encoding", "identity"), ("Content-Encoding", "gzip")])
        #expect(coded.status == 415)
    }

    /// Query names and values are read percent-decoded, every one of them: `%73ince` is `since`, `%31` is `1`.
    @Test func queryArgumentsAreReadDecoded() throws {
        let (server, version) = try serverWithInbox()
        #expect(server.send("PUT", "/v1/collections/second", body: #"{"sections": []}"#).status == 201)
        let page = server.send("GET", "/v1/collections?limit=%31")
        #expect(page.status == 200)
        #expect((page.json["collections"] as? [Any])?.count == 1)
        let changes = server.send("GET", "/v1/collections/inbox/changes?%73ince=\(version)&timeout=%30&cursor=%37")
        #expect(changes.status == 200)
        #expect(changes.json["reset"] == nil && changes.json["from"] as? String == version)
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=\(version)&timeout=%3").status == 400)
    }

    @Test func items() throws {
        let (server, _) = try serverWithInbox()
        let item = server.send("GET", "/v1/collections/inbox/items/a")
        #expect(item.status == 200)
        #expect(item.json["at"] as? [Int] == [0, 0])
        #expect(server.send("GET", "/v1/collections/inbox/items/zz").errorCode == "item_not_found")
        #expect(server.send("PUT", "/v1/collections/inbox/items/c", body: #"{"data": 3}"#).status == 201)
        #expect(server.send("PUT", "/v1/collections/inbox/items/c", body: #"{"data": 4}"#).status == 200)
        #expect(server.send("DELETE", "/v1/collections/inbox/items/c").status == 200)
        #expect(server.send("DELETE", "/v1/collections/inbox/items/c").errorCode == "item_not_found")
        #expect(server.send("PUT", "/v1/collections/none/items/c", body: #"{"data": 3}"#).status == 404)
    }

    /// A collection with no section gets section `"default"` from its first upsert, whether the upsert leaves
    /// `section` out or names `"default"`; another section is still not found.
    @Test func anUpsertNamingDefaultCreatesIt() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/collections/empty", body: #"{"sections": []}"#).status == 201)
        let other = server.send("PUT", "/v1/collections/empty/items/x", body: #"{"section": "todo"}"#)
        #expect(other.status == 409 && other.errorCode == "section_not_found")
        let named = server.send("PUT", "/v1/collections/empty/items/a", body: #"{"data": 1, "section": "default"}"#)
        #expect(named.status == 201)
        #expect(server.send("GET", "/v1/collections/empty/items/a").json["at"] as? [Int] == [0, 0])
        let snapshot = server.send("GET", "/v1/collections/empty").json
        #expect((snapshot["sections"] as? [[String: Any]])?.map { $0["id"] as? String } == ["default"])
    }

    /// Polls and streams from a version older than the kept history are `410` as any expired cursor, and counted
    /// apart (clients falling behind under load reload whole snapshots); other epochs and versions ahead are not.
    @Test func cursorsBehindTheKeptHistoryAreCounted() throws {
        let server = try InProcessServer(["--history", "2"])
        let first = try #require(
            server.send("PUT", "/v1/collections/c", body: #"{"sections": [{"id": "s"}]}"#).json["version"] as? String)
        for index in 0..<4 {
            #expect(server.send("PUT", "/v1/collections/c/items/i\(index)", body: #"{"data": 1}"#).status == 201)
        }
        func counted() -> Bool {
            server.send("GET", "/metrics").text.contains("changeserver_cursors_behind_history_total 2")
        }
        #expect(server.send("GET", "/v1/collections/c/changes?since=\(first)").status == 410)
        #expect(server.send("GET", "/v1/collections/c/changes?since=other.1").status == 410)
        let stream = server.send(
            "GET", "/v1/collections/c/changes?since=\(first)", headers: [("Accept", "text/event-stream")])
        #expect(stream.text.contains("event: gone"))
        #expect(counted())
    }

    @Test func feed() throws {
        let (server, version) = try serverWithInbox()
        let reset = server.send("GET", "/v1/collections/inbox/changes")
        #expect(reset.json["reset"] as? Bool == true)
        #expect(reset.header("Cache-Control") == "public, max-age=2, stale-while-revalidate=2")
        _ = server.send("PUT", "/v1/collections/inbox/items/c", body: #"{"data": 3}"#)
        let caughtUp = server.send("GET", "/v1/collections/inbox/changes?since=\(version)")
        #expect(caughtUp.status == 200)
        #expect(caughtUp.json["from"] as? String == version)
        let current = try #require(caughtUp.json["to"] as? String)
        let held = server.send("GET", "/v1/collections/inbox/changes?since=\(current)&timeout=7")
        #expect(held.held?.since.description == current)
        #expect(held.held?.timeout == 7)
        let empty = server.send("GET", "/v1/collections/inbox/changes?since=\(current)&timeout=0")
        #expect(empty.json["from"] as? String == current)
        #expect(empty.json["to"] as? String == current)
        let clamped = server.send("GET", "/v1/collections/inbox/changes?since=\(current)&timeout=100000")
        #expect(clamped.held?.timeout == 300)
        let otherEpoch = server.send("GET", "/v1/collections/inbox/changes?since=other.1")
        #expect(otherEpoch.status == 410)
        #expect(otherEpoch.errorCode == "cursor_expired")
        #expect(otherEpoch.json["current"] as? String == current)
        let overflow = server.send("GET", "/v1/collections/inbox/changes?since=abc.99999999999999999999999")
        #expect(overflow.status == 410)
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=nodot").errorCode == "bad_request")
        // One spelling per version, as an ETag has: a leading zero is not another way to write a version.
        let epoch = current.split(separator: ".")[0]
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=\(epoch).01").errorCode == "bad_request")
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=\(epoch).00").errorCode == "bad_request")
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=\(epoch).0").status == 200)
        #expect(server.send("GET", "/v1/collections/inbox/changes?since=\(current)&timeout=-1").status == 400)
        #expect(server.send("GET", "/v1/collections/none/changes").status == 404)
    }

    /// Changes that cancel out (an item inserted, then deleted) leave an empty changeset but a newer version: a
    /// poll that does not wait, and a stream, are moved to it at once, as a held poll is (they were left at
    /// `since`, their version no longer the collection's `ETag`).
    @Test func changesThatCancelOutStillMoveTheFeedToTheCurrentVersion() throws {
        let (server, version) = try serverWithInbox()
        _ = server.send("PUT", "/v1/collections/inbox/items/c", body: #"{"data": 3}"#)
        _ = server.send("DELETE", "/v1/collections/inbox/items/c")
        let current = try #require(server.send("GET", "/v1/collections/inbox").json["version"] as? String)
        #expect(current != version)
        let poll = server.send("GET", "/v1/collections/inbox/changes?since=\(version)&timeout=0")
        #expect(poll.json["from"] as? String == version)
        #expect(poll.json["to"] as? String == current)
        #expect((poll.json["next"] as? String)?.hasPrefix("since=\(current)&") == true)
        let stream = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(version)", headers: [("Accept", "text/event-stream")])
        #expect(stream.text.contains("id: \(current)\n"), "\(stream.text)")
    }

    @Test(arguments: [
        ("text/event-stream", true), ("application/json, Text/Event-Stream;charset=utf-8", true),
        ("text/event-stream;q=0.5", true), ("application/json, text/event-stream;q=0", false),
        ("text/event-stream; q=0.0", false), ("application/json", false), ("text/event-streams", false),
    ])
    func aStreamIsOpenedOnlyWhenAcceptWantsOne(accept: String, streams: Bool) throws {
        let (server, version) = try serverWithInbox()
        let answer = server.send(
            "GET", "/v1/collections/inbox/changes?since=\(version)&timeout=0", headers: [("Accept", accept)])
        #expect(answer.header("Content-Type")?.hasPrefix("text/event-stream") == streams, "\(accept)")
    }

    /// Streams cut all at once (a stop, a network fault) must not all reconnect in the same instant: each tells its
    /// browser its own wait, within 1 to 3 s.
    @Test func everyStreamIsToldItsOwnReconnectionWait() throws {
        let (server, version) = try serverWithInbox()
        let waits = try (0..<20).map { _ in
            let stream = server.send(
                "GET", "/v1/collections/inbox/changes?since=\(version)", headers: [("Accept", "text/event-stream")])
            let line = try #require(stream.text.split(separator: "\n").first { $0.hasPrefix("retry: ") })
            return try #require(Int(line.dropFirst("retry: ".count)))
        }
        #expect(waits.allSatisfy { (1000...3000).contains($0) }, "\(waits)")
        #expect(Set(waits).count > 1, "\(waits)")
    }

    /// A preflight from an allowed origin passes for a path that names nothing, or an invalid name, so that the
    /// browser sends the request and the page reads its `404` or `400`; a refused preflight showed the page
    /// "Failed to fetch" and nothing else.
    @Test func aPreflightOfAPathThatNamesNothingPasses() throws {
        let server = try InProcessServer(["--cors-origin", "https://app.example"])
        let preflight = [("Origin", "https://app.example"), ("Access-Control-Request-Method", "PUT")]
        for path in [
            "/v1/nowhere", "/v1/collections/bad%20name!", "/v1/views/a%20b", "/v1/collections/%zz",
            "/v1/collections/bad%20name!/changes",
        ] {
            let answer = server.send("OPTIONS", path, headers: preflight)
            #expect(answer.status == 204, "\(path)")
            #expect(answer.header("Access-Control-Allow-Methods") == "GET, HEAD, PUT, POST, DELETE, OPTIONS", "\(path)")
            #expect(answer.header("Allow") == nil, "\(path)")
            #expect((answer.header("Cache-Control") == "no-store") == path.hasSuffix("/changes"), "\(path)")
        }
        #expect(server.send("PUT", "/v1/collections/bad%20name!", body: "{}").errorCode == "invalid_name")
        // A plain OPTIONS, a preflight from another origin, and one with no method asked, are answered as before.
        #expect(server.send("OPTIONS", "/v1/nowhere").status == 404)
        #expect(server.send("OPTIONS", "/v1/collections/bad%20name!").status == 400)
        let foreign = [("Origin", "https://other.example"), ("Access-Control-Request-Method", "PUT")]
        #expect(server.send("OPTIONS", "/v1/nowhere", headers: foreign).status == 404)
        #expect(server.send("OPTIONS", "/v1/nowhere", headers: [("Origin", "https://app.example")]).status == 404)
        // A route's preflight allows every method too, so that one the route does not take gets its readable 405.
        for path in ["/v1/collections/x", "/v1/views/v/items/x", "/v1/collections/x/changes"] {
            let named = server.send("OPTIONS", path, headers: preflight)
            #expect(named.header("Access-Control-Allow-Methods") == "GET, HEAD, PUT, POST, DELETE, OPTIONS", "\(path)")
        }
        #expect(
            server.send("OPTIONS", "/v1/collections/x", headers: preflight).header("Allow")
                == "GET, HEAD, PUT, DELETE, OPTIONS")
        #expect(server.send("PUT", "/v1/views/v/items/x", body: "{}").status == 405)
        #expect(
            server.app.screen(Request(method: "OPTIONS", path: "/v1/nowhere", headers: preflight)).refusal?.status
                == .noContent)
    }

    @Test func methodsAndPreflight() throws {
        let server = try InProcessServer()
        let wrong = server.send("POST", "/v1/collections")
        #expect(wrong.status == 405)
        #expect(wrong.header("Allow") == "GET, HEAD, OPTIONS")
        let options = server.send("OPTIONS", "/v1/collections/x")
        #expect(options.status == 204)
        #expect(options.header("Allow") == "GET, HEAD, PUT, DELETE, OPTIONS")
        // A feed's preflight is never stored by a cache, a view's as a collection's.
        for feed in ["/v1/collections/x/changes", "/v1/views/x/changes"] {
            #expect(server.send("OPTIONS", feed).header("Cache-Control") == "no-store", "\(feed)")
        }
    }

    @Test func tokens() throws {
        let server = try InProcessServer(["--write-token", "w", "--read-token", "r"])
        #expect(server.send("PUT", "/v1/collections/c", body: #"{"sections": []}"#).errorCode == "unauthorized")
        let readerWrites = server.send(
            "PUT", "/v1/collections/c", body: #"{"sections": []}"#, headers: [("Authorization", "Bearer r")])
        #expect(readerWrites.status == 401)
        #expect(
            server.send(
                "PUT", "/v1/collections/c", body: #"{"sections": []}"#, headers: [("Authorization", "Bearer w")]
            )
            .status == 201)
        #expect(server.send("GET", "/v1/collections/c").status == 401)
        #expect(server.send("GET", "/v1/collections/c", headers: [("Authorization", "Bearer r")]).status == 200)
        #expect(server.send("GET", "/healthz").status == 200)
    }

    /// Two `Authorization` lines are refused wherever a token is needed, whichever of them holds it: the first
    /// had decided. Without tokens the header means nothing and is not looked at.
    @Test func repeatedAuthorizationIs400() throws {
        let server = try InProcessServer(["--write-token", "w", "--read-token", "r"])
        for lines in [["Bearer w", "Bearer x"], ["Bearer x", "Bearer w"], ["Bearer w", "Bearer w"]] {
            let headers = lines.map { ("Authorization", $0) }
            let write = server.send("PUT", "/v1/collections/c", body: #"{"sections": []}"#, headers: headers)
            #expect(write.status == 400, "\(lines)")
            #expect(write.errorCode == "bad_request")
            #expect(server.send("GET", "/v1/collections/c", headers: headers).status == 400, "\(lines)")
        }
        #expect(server.send("GET", "/v1/collections/c", headers: [("Authorization", "Bearer w")]).status == 404)
        #expect(
            server.send("GET", "/healthz", headers: [("Authorization", "a"), ("Authorization", "b")]).status == 200)
        let open = try InProcessServer()
        let headers = [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
        #expect(open.send("PUT", "/v1/collections/c", body: #"{"sections": []}"#, headers: headers).status == 201)
    }

    /// API.md: a server with any token is never writable anonymously, so with only a read token writes need it.
    @Test func readTokenAloneGuardsWritesToo() throws {
        let server = try InProcessServer(["--read-token", "r"])
        #expect(server.send("PUT", "/v1/collections/c", body: #"{"sections": []}"#).status == 401)
        #expect(
            server.send(
                "PUT", "/v1/collections/c", body: #"{"sections": []}"#, headers: [("Authorization", "Bearer r")]
            )
            .status == 201)
    }

    @Test func largeBodiesAreDecodedOffTheLoop() throws {
        let server = try InProcessServer()
        let items = (0..<5000).map { #"{"id": "i\#($0)", "data": {"n": \#($0)}}"# }.joined(separator: ",")
        let body = #"{"sections": [{"id": "s", "items": [\#(items)]}]}"#
        #expect(body.utf8.count >= App.largeBodyBytes)
        let created = server.send("PUT", "/v1/collections/big", body: body)
        #expect(created.status == 201)
        #expect(
            (server.send("GET", "/v1/collections").json["collections"] as? [[String: Any]])?.first?["items"] as? Int
                == 5000)
        let broken = server.send("PUT", "/v1/collections/big", body: String(body.dropLast()))
        #expect(broken.errorCode == "bad_json")
    }

    /// A body under `--max-body-bytes` whose record is larger than the journal takes gets `413` and changes nothing.
    @Test func recordsLargerThanTheJournalTakesAre413() throws {
        let server = try InProcessServer(recordLimit: 500)
        let items = (0..<100).map { #"{"id": "item\#($0)", "data": 1e2}"# }.joined(separator: ",")
        let answer = server.send(
            "PUT", "/v1/collections/c", body: #"{"sections": [{"id": "s", "items": [\#(items)]}]}"#)
        #expect(answer.status == 413)
        #expect(answer.errorCode == "payload_too_large")
        #expect(server.send("GET", "/v1/collections/c").status == 404)
        #expect(server.send("PUT", "/v1/collections/c", body: #"{"sections": []}"#).status == 201)
    }

    @Test func drainingAnswers503() throws {
        let server = try InProcessServer()
        server.app.shutDown()
        let answer = server.send("GET", "/v1/collections")
        #expect(answer.status == 503)
        #expect(answer.errorCode == "shutting_down")
        #expect(answer.header("Retry-After") == "1")
    }
}
