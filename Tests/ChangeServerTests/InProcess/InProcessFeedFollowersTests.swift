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
        #expect(
            server.send("PUT", "/v1/collections/c", body: #"{"sections": [{"id": "s", "items": []}]}"#).status == 201)
        let entry = try #require(server.app.registry.entry("c"))
        let before = entry.version
        #expect(server.send("PUT", "/v1/collections/c/items/a", body: #"{"data": 1, "section": "s"}"#).status < 300)
        let after = entry.version
        #expect(after != before)
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
}
