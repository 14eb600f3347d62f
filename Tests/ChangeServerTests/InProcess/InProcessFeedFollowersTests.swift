import Model
import Testing

@testable import ChangeServer

/// A commit that nobody follows is not posted to the loops (`Followers`), so a poll that comes to be held just
/// after a commit it did not see must find it out itself: it is due at once. Held and answered polls are counted
/// as followers of their collection exactly while they are held.
@Suite struct InProcessFeedFollowersTests {
    /// A feed on its own (no loop): what it answers is recorded.
    private final class Answers {
        var exchanges: [(Exchange, SharedResponse)] = []
    }

    private static func feed(_ server: InProcessServer, _ answers: Answers) -> Feed {
        Feed(metrics: server.app.metrics, caching: server.app.feedCaching) { exchanges, response in
            for exchange in exchanges { answers.exchanges.append((exchange, response)) }
        }
    }

    private static func poll(_ name: String) -> Exchange {
        Exchange(unconnected: Request(method: "GET", path: "/v1/collections/\(name)/changes", query: [], headers: []))
    }

    @Test func aPollHeldFromAVersionItMissedIsDueAtOnceAndOthersWait() throws {
        let server = try InProcessServer()
        let (entry, before, after) = try Self.collectionThatMoved(server)
        #expect(entry.followers.isEmpty)

        let answers = Answers()
        let feed = Self.feed(server, answers)
        let current = Self.poll("c")
        feed.hold(current, on: entry, since: after, timeout: 10, cursor: nil)
        let now = MonotonicClock.now()
        #expect(try #require(feed.nextDeadline) > now + 9_000, "a poll at the current version waits its timeout")
        #expect(!entry.followers.isEmpty)

        // Read by its route before the upsert committed, held after it: the commit was not posted to it.
        let missed = Self.poll("c")
        feed.hold(missed, on: entry, since: before, timeout: 10, cursor: nil)
        #expect(try #require(feed.nextDeadline) <= MonotonicClock.now(), "the poll that missed a commit is due now")
        feed.expire(now: MonotonicClock.now())
        #expect(answers.exchanges.count == 1)
        let (answered, response) = try #require(answers.exchanges.first)
        #expect(answered === missed)
        let body = String(decoding: response.wire, as: UTF8.self)
        #expect(body.contains(#""from":"\#(before)""#) && body.contains(#""to":"\#(after)""#), "\(body)")

        #expect(!entry.followers.isEmpty, "the poll still held follows")
        #expect(feed.drop(current))
        #expect(entry.followers.isEmpty, "no poll follows once both are gone")
    }

    /// A cursor from a server ahead of this one (`--postgres`) waits for this server to pass it, also when the
    /// collection moved while it was being held.
    @Test func aPollAheadOfTheServerWaits() throws {
        let server = try InProcessServer()
        let (entry, before, _) = try Self.collectionThatMoved(server)
        let answers = Answers()
        let feed = Self.feed(server, answers)
        let ahead = Version(epoch: before.epoch, seq: entry.version.seq + 5)
        feed.hold(Self.poll("c"), on: entry, since: ahead, timeout: 10, cursor: nil)
        #expect(try #require(feed.nextDeadline) > MonotonicClock.now() + 9_000)
        feed.expire(now: MonotonicClock.now())
        #expect(answers.exchanges.isEmpty)
    }

    /// A stream opened from a version it missed gets its catch-up on the loop's next turn (`tick`), outside
    /// libmicrohttpd's callback where it was opened; one opened at the current version waits for its heartbeat. Both
    /// follow until they close.
    @Test func aStreamOpenedFromAVersionItMissedCatchesUpAtTheNextTick() throws {
        let server = try InProcessServer()
        let (entry, before, after) = try Self.collectionThatMoved(server)
        let hub = StreamHub(metrics: server.app.metrics)
        var generator = SystemRandomNumberGenerator()
        let opening = ServerSentEvents.opening(using: &generator)
        let current = Self.stream()
        hub.open(current, StreamStart(subject: entry, version: after, initial: opening, ends: false))
        #expect(try #require(hub.nextDeadline) > MonotonicClock.now() + 10_000)
        let missed = Self.stream()
        hub.open(missed, StreamStart(subject: entry, version: before, initial: opening, ends: false))
        #expect(hub.nextDeadline == 0, "due at once")
        #expect(Self.delivered(server) == 0, "nothing sent inside the callback")
        hub.tick(now: MonotonicClock.now())
        #expect(Self.delivered(server) == 1, "the missed commit, to the stream that missed it")
        #expect(try #require(hub.nextDeadline) > MonotonicClock.now() + 10_000)
        hub.tick(now: MonotonicClock.now())
        #expect(Self.delivered(server) == 1, "once")

        #expect(!entry.followers.isEmpty)
        for stream in [current, missed] { stream.onClose?(stream) }
        #expect(entry.followers.isEmpty, "no stream follows once both closed")
    }

    /// Collection `c`, and its versions before and after an upsert.
    private static func collectionThatMoved(_ server: InProcessServer) throws -> (CollectionEntry, Version, Version) {
        #expect(
            server.send("PUT", "/v1/collections/c", body: #"{"sections": [{"id": "s", "items": []}]}"#).status == 201)
        let entry = try #require(server.app.registry.entry("c"))
        let before = entry.version
        #expect(server.send("PUT", "/v1/collections/c/items/a", body: #"{"data": 1, "section": "s"}"#).status < 300)
        #expect(entry.version != before)
        return (entry, before, entry.version)
    }

    /// A stream on no connection: libmicrohttpd never reads it, so what it is sent stays queued.
    private static func stream() -> EventStream {
        EventStream(
            connection: OpaquePointer(bitPattern: 1)!, isChunked: true, resume: { _ in }, firstWait: { _, _ in false },
            wasCut: { _ in })
    }

    /// `changeserver_changesets_delivered_total` of the server's metrics.
    private static func delivered(_ server: InProcessServer) -> Int {
        let text = server.app.metrics.render(
            .init(collections: 0, logLinesDropped: 0, bodyBytesInFlight: 0, responseBytesHeld: 0))
        let line = text.split(separator: "\n").first { $0.hasPrefix("changeserver_changesets_delivered_total ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
    }
}
