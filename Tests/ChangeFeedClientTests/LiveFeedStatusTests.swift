import ChangeFeedClient
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

/// `FeedStatus` against a fake server: what an app shows while the feed connects, follows, and retries, and the
/// short poll (`timeout=0`) that makes the feed `.live` as soon as the server answers.
@Suite("LiveFeedStatusTests", .tags(.liveServer), .timeLimit(.minutes(5)))
struct LiveFeedStatusTests {
    typealias Answer = FakeServer.Answer

    static let noItems = #"{"deleted":[],"inserted":[],"moved":[],"updated":[]}"#
    static let update = LiveFakeServerTests.changes(
        #"{"deleted":[],"inserted":[],"moved":[],"updated":[{"at":[0,0],"id":"a","data":2}]}"#)

    /// An update from `e.2` to `e.3`.
    static let later = LiveFakeServerTests.changes(
        #"{"deleted":[],"inserted":[],"moved":[],"updated":[{"at":[0,0],"id":"a","data":3}]}"#, from: "e.2", to: "e.3")

    /// An update from `e.3` to `e.4`.
    static let last = LiveFakeServerTests.changes(
        #"{"deleted":[],"inserted":[],"moved":[],"updated":[{"at":[0,0],"id":"a","data":4}]}"#, from: "e.3", to: "e.4")

    /// An empty answer at `e.1` to a short poll, with the `next` a server gives it.
    static let shortAnswer =
        String(LiveFakeServerTests.changes(noItems, from: "e.1", to: "e.1").dropLast())
        + #","next":"since=e.1&timeout=0&cursor=9"}"#

    /// Statuses as an app hears them.
    final class Heard: Sendable {
        private let statuses = Mutex<[FeedStatus]>([])

        var handler: @Sendable (FeedStatus) -> Void { { status in self.statuses.withLock { $0.append(status) } } }

        /// `connecting`, `live`, `retrying N`.
        var names: [String] {
            statuses.withLock { $0 }.map { status in
                switch status {
                case .connecting: "connecting"
                case .live: "live"
                case .retrying(let attempt, _): "retrying \(attempt)"
                }
            }
        }
    }

    /// The requests `server` received.
    static func polls(_ server: FakeServer) -> [String] {
        server.received.map(\.target)
    }

    @Test func aFailureIsRetryingAndTheShortPollAfterItIsLive() async throws {
        let failed = Atomic<Bool>(false)
        let server = try FakeServer { _, target in
            if !target.contains("since=") { return Answer(status: 200, body: LiveFakeServerTests.reset) }
            if target.contains("timeout=0") { return Answer(status: 200, body: Self.shortAnswer) }
            if !failed.exchange(true, ordering: .relaxed) {
                return Answer(status: 503, body: #"{"error":{"code":"shutting_down","message":""}}"#)
            }
            return Answer(status: 200, body: Self.update)
        }
        defer { server.stop() }
        let heard = Heard()
        var events = LiveFakeServerTests.client(server).events(onStatus: heard.handler).makeAsyncIterator()
        guard case .reset = try await events.next() else { throw TestFailure("no reset") }
        guard case .changes(let changeset) = try await events.next() else { throw TestFailure("no changes") }
        #expect(changeset.to == Version("e.2"))
        #expect(heard.names == ["connecting", "live", "retrying 1", "live"])
        // The poll after the failure is short, and the held one after it leaves the short answer's `next` behind.
        #expect(
            Self.polls(server) == [
                "/v1/collections/c/changes?timeout=5", "/v1/collections/c/changes?since=e.1&timeout=5",
                "/v1/collections/c/changes?since=e.1&timeout=0", "/v1/collections/c/changes?since=e.1&timeout=5",
            ])
    }

    /// A feed resumed from a saved version asks with a short poll first: `.live` comes when the server answers,
    /// not after a held poll's whole timeout when nothing changed.
    @Test func aResumedFeedIsLiveAsSoonAsTheServerAnswers() async throws {
        let server = try FakeServer { _, target in
            return Answer(status: 200, body: target.contains("timeout=0") ? Self.shortAnswer : Self.update)
        }
        defer { server.stop() }
        let heard = Heard()
        let client = LiveFakeServerTests.client(server)
        var events = client.events(resumingFrom: Version("e.1"), onStatus: heard.handler).makeAsyncIterator()
        guard case .changes = try await events.next() else { throw TestFailure("no changes") }
        #expect(heard.names == ["connecting", "live"])
        #expect(
            Self.polls(server) == [
                "/v1/collections/c/changes?since=e.1&timeout=0", "/v1/collections/c/changes?since=e.1&timeout=5",
            ])
    }

    /// A short poll's `next` keeps its `timeout=0` and a cursor counted for it; so does a held poll's answer that a
    /// cache which ignores the query string took from a short one. The poll after either is held, with `since`.
    @Test func aShortAnswersNextIsNotFollowed() async throws {
        let shortNext = #","next":"since=e.2&timeout=0&cursor=9"}"#
        let server = try FakeServer { index, target in
            switch index {
            case 0: Answer(status: 200, body: String(Self.update.dropLast()) + shortNext)
            case 1: Answer(status: 200, body: String(Self.later.dropLast()) + shortNext)
            default: Answer(status: 200, body: target.contains("timeout=0") ? Self.shortAnswer : Self.last)
            }
        }
        defer { server.stop() }
        var events = LiveFakeServerTests.client(server).events(resumingFrom: Version("e.1")).makeAsyncIterator()
        guard case .changes = try await events.next() else { throw TestFailure("no changes") }
        guard case .changes = try await events.next() else { throw TestFailure("no second changes") }
        guard case .changes = try await events.next() else { throw TestFailure("no third changes") }
        #expect(
            Self.polls(server) == [
                "/v1/collections/c/changes?since=e.1&timeout=0", "/v1/collections/c/changes?since=e.2&timeout=5",
                "/v1/collections/c/changes?since=e.3&timeout=5",
            ])
    }

    /// A `404` to a poll from a saved version is a failure (with several servers, one may not have the collection
    /// yet), not the server's word that it is missing: `.live` comes once a reset finds it missing, and does not
    /// flash between the retries.
    @Test func aResumedFeedWhoseCollectionIsGoneRetriesThenIsLiveAndMissing() async throws {
        let server = try FakeServer { _, _ in
            Answer(status: 404, body: #"{"error":{"code":"collection_not_found","message":""}}"#)
        }
        defer { server.stop() }
        let heard = Heard()
        let client = LiveFakeServerTests.client(server)
        var events = client.events(resumingFrom: Version("e.1"), onStatus: heard.handler).makeAsyncIterator()
        guard case .missing = try await events.next() else { throw TestFailure("no missing event") }
        #expect(heard.names == ["connecting", "retrying 1", "retrying 2", "retrying 3", "live"])
        #expect(Self.polls(server).last == "/v1/collections/c/changes?timeout=5")
    }

    /// A server that answers short polls but refuses held ones (`429` at `--max-held-polls`) is still a failure
    /// growing its backoff: a short poll's answer does not end it, nor report `.live` (a banner would flicker).
    @Test func shortAnswersDoNotEndTheBackoffOfRefusedHeldPolls() async throws {
        let server = try FakeServer { _, target in
            if !target.contains("since=") { return Answer(status: 200, body: LiveFakeServerTests.reset) }
            if target.contains("timeout=0") { return Answer(status: 200, body: Self.shortAnswer) }
            return Answer(status: 429, body: #"{"error":{"code":"too_many_polls","message":""}}"#)
        }
        defer { server.stop() }
        let heard = Heard()
        let client = LiveFakeServerTests.client(server)
        let task = Task {
            var events = client.events(onStatus: heard.handler).makeAsyncIterator()
            while try await events.next() != nil {}
        }
        #expect(await waitUntil(timeout: 60) { heard.names.filter { $0.hasPrefix("retrying") }.count >= 3 })
        task.cancel()
        _ = try await task.value
        #expect(
            Array(heard.names.filter { $0.hasPrefix("retrying") }.prefix(3)) == [
                "retrying 1", "retrying 2", "retrying 3",
            ])
        #expect(Array(heard.names.prefix(5)) == ["connecting", "live", "retrying 1", "retrying 2", "retrying 3"])
    }
}
