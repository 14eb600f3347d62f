import Foundation
import Testing

@testable import ChangeServer

/// Reads whose snapshot takes long to encode go off the event loop (`App.answerRead`), and the feed's large resets
/// are shared while they are sent, as large snapshot reads are.
@Suite struct InProcessSlowReadsTests {
    /// A collection of `count` items, each with `padding` bytes of data.
    static func collection(_ count: Int, padding: Int = 0) -> String {
        let data = String(repeating: "p", count: padding)
        let items = (0..<count).map { #"{"id":"i\#($0)","data":"\#(data)"}"# }.joined(separator: ",")
        return #"{"sections":[{"id":"s","items":["# + items + "]}]}"
    }

    /// The first read of a collection of 10,000 items encodes its snapshot on a bulk thread (the route answers
    /// later); the next is answered at once from the snapshot kept encoded, with the same bytes. A small
    /// collection's first read is answered at once.
    @Test func aLargeSnapshotIsEncodedOffTheLoopOnce() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/collections/large", body: Self.collection(10_000)).status == 201)
        #expect(server.send("PUT", "/v1/collections/small", body: Self.collection(10)).status == 201)
        let first = RecordingConnection()
        guard case .later = server.app.handle(Request(method: "GET", path: "/v1/collections/large"), on: first).result
        else {
            Issue.record("the first read of 10,000 items was answered on the loop")
            return
        }
        let encoded = first.wait()
        #expect(encoded.status == 200)
        guard
            case .respond(let kept) = server.app.handle(
                Request(method: "GET", path: "/v1/collections/large"), on: RecordingConnection()
            ).result
        else {
            Issue.record("the snapshot kept encoded was encoded again off the loop")
            return
        }
        #expect(kept.body == encoded.body && (encoded.json["sections"] as? [Any])?.count == 1)
        let small = server.app.handle(Request(method: "GET", path: "/v1/collections/small"), on: RecordingConnection())
        guard case .respond = small.result else {
            Issue.record("a read of 10 items went off the loop")
            return
        }
    }

    /// Whether a snapshot is slow to encode is judged by its bytes too: 150 items of 8 KB each (1.2 MB) are encoded
    /// off the loop, where they were encoded on it for every read (only 10,000 items or more went off it).
    @Test func aSnapshotOfFewLargeItemsIsEncodedOffTheLoop() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/collections/wide", body: Self.collection(150, padding: 8_000)).status == 201)
        let connection = RecordingConnection()
        guard
            case .later = server.app.handle(Request(method: "GET", path: "/v1/collections/wide"), on: connection).result
        else {
            Issue.record("a read of 1.2 MB of content was answered on the loop")
            return
        }
        let read = connection.wait()
        #expect(read.status == 200 && read.body.count > 1_200_000)
    }

    /// Resets of a collection whose snapshot is over 1 MiB: the first is written off the loop and held apart; the
    /// next, while the first is still held (being sent), is answered at once from the same bytes, where each was
    /// encoded and held on its own (30 resets of an 86 MB snapshot held 1 GB of `--max-response-memory`).
    @Test func largeResetsShareOneBody() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/collections/big", body: Self.collection(12_000, padding: 100)).status == 201)
        let reset = Request(method: "GET", path: "/v1/collections/big/changes", query: [("timeout", "5")])
        let first = server.answer(reset)
        #expect(first.status == 200 && first.json["reset"] as? Bool == true && first.body.count > 1 << 20)
        let firstBody = try #require(first.sharedBody, "a reset of \(first.body.count) bytes was not held apart")
        let second = RecordingConnection()
        guard case .respond(let shared) = server.app.handle(reset, on: second).result else {
            Issue.record("a reset was encoded again while the same one was being sent")
            return
        }
        #expect(shared.sharedBody === firstBody)
        #expect(Answer(shared).body == first.body)
        // Another timeout names another `next`: its own reset.
        let other = server.answer(
            Request(method: "GET", path: "/v1/collections/big/changes", query: [("timeout", "7")]))
        #expect(other.status == 200 && other.sharedBody !== firstBody && other.text.contains("timeout=7"))
    }

    /// A stream opened without a version on a collection of 10,000 items starts off the loop (the route answers
    /// later) with the snapshot as `event: reset`; the streams opened while one holds that event share it, and are
    /// started at once. Each encoded its own on the loop (20 streams of a 16 MB snapshot that read nothing held
    /// 467 MB, and `/healthz` waited 1.6 s).
    @Test func streamsOpenedWithoutAVersionShareOneResetMadeOffTheLoop() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/collections/big", body: Self.collection(10_000)).status == 201)
        let stream = Request(
            method: "GET", path: "/v1/collections/big/changes", headers: [("Accept", "text/event-stream")])
        let first = RecordingConnection()
        guard case .later = server.app.handle(stream, on: first).result else {
            Issue.record("a stream of 10,000 items was started with its snapshot encoded on the loop")
            return
        }
        let started = first.wait()
        let reset = try #require(started.streamReset, "the stream did not start with a shared reset")
        let snapshot = server.send("GET", "/v1/collections/big")
        #expect(started.status == 200 && started.text.contains("event: reset\nid: \(reset.version)\n"))
        #expect(started.text.contains(#""snapshot":"# + snapshot.text + "}\n\n"))
        guard case .stream(let second) = server.app.handle(stream, on: RecordingConnection()).result else {
            Issue.record("a stream was started off the loop while its reset was held")
            return
        }
        #expect(second.reset === reset && second.version == reset.version)
        // A `HEAD` gets the headers alone, at once: nothing is encoded for it.
        let head = Request(
            method: "HEAD", path: "/v1/collections/big/changes", headers: [("Accept", "text/event-stream")])
        guard case .stream(let headers) = server.app.handle(head, on: RecordingConnection()).result else {
            Issue.record("a HEAD of a stream was not answered at once")
            return
        }
        #expect(headers.reset == nil && headers.ends)
        // After a change, the next stream has a reset of the new version.
        #expect(server.send("PUT", "/v1/collections/big/items/i1", body: #"{"data":1}"#).status == 200)
        let later = RecordingConnection()
        _ = server.app.handle(stream, on: later)
        let next = try #require(later.wait().streamReset)
        #expect(next !== reset && next.version != reset.version)
        withExtendedLifetime(reset) {}
    }
}
