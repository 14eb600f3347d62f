import ChangeFeedClient
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

/// The client against a fake server (a local responder) for what a real server never answers: malformed or
/// rule-breaking changesets, retry signals, refusals.
@Suite("LiveFakeServerTests", .tags(.liveServer), .serialized, .timeLimit(.minutes(10)))
struct LiveFakeServerTests {
    static let reset =
        #"{"collection":"c","reset":true,"to":"e.1","snapshot":{"collection":"c","version":"e.1","#
        + #""sections":[{"id":"s","data":null,"items":[{"id":"a","data":null},{"id":"b","data":1}]}]}}"#

    static func changes(_ items: String, from: String = "e.1", to: String = "e.2") -> String {
        #"{"collection":"c","from":"\#(from)","to":"\#(to)","changes":{"from":"\#(from)","to":"\#(to)","#
            + #""sections":{"deleted":[],"inserted":[],"moved":[],"updated":[]},"items":\#(items)}}"#
    }

    static func client(_ server: FakeServer) -> FeedClient {
        var client = FeedClient(
            baseURL: server.baseURL, name: "c", pollTimeout: .seconds(5),
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(100)))
        client.missingRetry = .milliseconds(20)
        return client
    }

    /// The error the second event of a feed whose first answer is a reset and whose second is `second` gives.
    /// The error following a feed meets when its second answer is `second`. Typed: the feed and the mirror throw
    /// `FeedError` alone, so `do throws(FeedError)` compiles around a `for try await` over the feed.
    static func errorAfterReset(_ second: String) async throws -> FeedError? {
        let server = try FakeServer { index, _ in
            FakeServer.Answer(status: 200, body: index == 0 ? Self.reset : second)
        }
        defer { server.stop() }
        var live = LiveCollection()
        do throws(FeedError) {
            for try await event in client(server).events() {
                try live.apply(event)
                if live.version?.seq == 2 { return nil }
            }
            return nil
        } catch {
            return error
        }
    }

    static let malformed: [(String, String)] = [
        (
            "unsorted",
            Self.changes(
                #"{"deleted":[{"at":[0,1],"id":"b"},{"at":[0,0],"id":"a"}],"inserted":[],"moved":[],"updated":[]}"#)
        ),
        (
            "rule 1",
            Self.changes(
                #"{"deleted":[{"at":[0,0],"id":"a"}],"inserted":[],"moved":[{"from":[0,0],"to":[0,1],"id":"a"}],"updated":[]}"#
            )
        ),
        ("wrong id", Self.changes(#"{"deleted":[{"at":[0,0],"id":"b"}],"inserted":[],"moved":[],"updated":[]}"#)),
        (
            "out of range",
            Self.changes(#"{"deleted":[],"inserted":[{"at":[0,5],"id":"x","data":null}],"moved":[],"updated":[]}"#)
        ),
        (
            "duplicate id",
            Self.changes(#"{"deleted":[],"inserted":[{"at":[0,0],"id":"b","data":null}],"moved":[],"updated":[]}"#)
        ),
        (
            "no section",
            Self.changes(#"{"deleted":[],"inserted":[{"at":[3,0],"id":"x","data":null}],"moved":[],"updated":[]}"#)
        ),
        (
            "update of another",
            Self.changes(#"{"deleted":[],"inserted":[],"moved":[],"updated":[{"at":[0,0],"id":"b","data":2}]}"#)
        ),
        (
            "from another version",
            Self.changes(#"{"deleted":[],"inserted":[],"moved":[],"updated":[]}"#, from: "e.7", to: "e.8")
        ),
    ]

    @Test(arguments: malformed)
    func aChangesetBreakingTheRulesIsATypedError(name: String, body: String) async throws {
        let error = try await Self.errorAfterReset(body)
        switch error {
        case .invalidChangeset, .invalidAnswer: break
        default: Issue.record("\(name): \(String(describing: error))")
        }
    }

    @Test(arguments: [
        "not json", "{}", #"{"collection":"c","from":"e.1","to":"e.2"}"#,
        LiveFakeServerTests.changes(#"{"deleted":[{"at":[0,-1],"id":"a"}],"inserted":[],"moved":[],"updated":[]}"#),
        LiveFakeServerTests.changes(#"{"deleted":[{"at":[0,0],"id":""}],"inserted":[],"moved":[],"updated":[]}"#),
        LiveFakeServerTests.changes(#"{"deleted":[{"at":[0],"id":"a"}],"inserted":[],"moved":[],"updated":[]}"#),
    ])
    func aMalformedAnswerIsATypedError(body: String) async throws {
        let error = try await Self.errorAfterReset(body)
        guard case .invalidAnswer = error else {
            Issue.record("\(body): \(String(describing: error))")
            return
        }
    }

    @Test func retryAfterIsHonouredOn503And429() async throws {
        let server = try FakeServer { index, _ in
            switch index {
            case 0:
                FakeServer.Answer(
                    status: 503, headers: ["Retry-After": "1"], body: #"{"error":{"code":"x","message":""}}"#)
            case 1: FakeServer.Answer(status: 429, body: #"{"error":{"code":"too_many_polls","message":""}}"#)
            default: FakeServer.Answer(status: 200, body: Self.reset)
            }
        }
        defer { server.stop() }
        var events = Self.client(server).events().makeAsyncIterator()
        guard case .reset(let snapshot) = try await events.next() else { throw TestFailure("no reset") }
        #expect(snapshot.sections.map(\.id) == ["s"])
        let times = server.received.map { $0.at }
        #expect(times.count == 3)
        #expect(times[1] - times[0] >= .seconds(1))
        #expect(times[2] - times[1] >= .milliseconds(10))
    }

    /// Only the server's own `429` for held polls (`too_many_polls`) has its wait capped at a few seconds: a
    /// front's rate limit (a `429` page of its own) backs off with the doubling, or every client would keep
    /// asking a front that limits them every 2 to 4 s.
    @Test(arguments: [
        (#"{"error":{"code":"too_many_polls","message":""}}"#, true),
        ("<html>Too Many Requests</html>", false),
    ])
    func onlyTheServersOwn429IsRetriedWithinSeconds(body: String, isCapped: Bool) async throws {
        let server = try FakeServer { _, _ in FakeServer.Answer(status: 429, body: body) }
        defer { server.stop() }
        let delays = Mutex<[Duration]>([])
        var client = Self.client(server)
        client.backoff = Backoff(initial: .seconds(5), maximum: .seconds(30))
        let following = Task {
            for try await _ in client.events(onStatus: { status in
                if case .retrying(_, let delay) = status { delays.withLock { $0.append(delay) } }
            }) {}
        }
        defer { following.cancel() }
        // By this backoff the first wait is 2.5 to 5 s and the second 5 to 10 s; capped, each is 2 to 4 s.
        let deadline = ContinuousClock.now + .seconds(20)
        while delays.withLock({ $0.count < 2 }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let waits = delays.withLock { $0 }
        try #require(waits.count >= 2, "\(waits)")
        if isCapped {
            #expect(waits.prefix(2).allSatisfy { $0 >= .seconds(2) && $0 <= .seconds(4) }, "\(waits)")
        } else {
            #expect(waits[1] >= .seconds(5), "\(waits)")
        }
    }

    @Test func aRefusalIsATypedErrorAndPollsFollowNext() async throws {
        let server = try FakeServer { index, _ in
            switch index {
            case 0:
                FakeServer.Answer(
                    status: 200, body: String(Self.reset.dropLast()) + #","next":"since=e.1&timeout=5&cursor=abc"}"#)
            default: FakeServer.Answer(status: 401, body: #"{"error":{"code":"unauthorized","message":"no"}}"#)
            }
        }
        defer { server.stop() }
        var events = Self.client(server).events().makeAsyncIterator()
        _ = try await events.next()
        await #expect(throws: FeedError.refused(status: 401, code: "unauthorized", message: "no")) {
            _ = try await events.next()
        }
        #expect(
            server.received.map { $0.target } == [
                "/v1/collections/c/changes?timeout=5", "/v1/collections/c/changes?since=e.1&timeout=5&cursor=abc",
            ])
    }

    @Test func aDeletedCollectionIsReportedOnceAndFollowedWhenMadeAgain() async throws {
        let deleted = #"{"error":{"code":"collection_deleted","message":"deleted"}}"#
        let missing = #"{"error":{"code":"collection_not_found","message":"none"}}"#
        // Made again, the collection has a new epoch.
        let remade = Self.reset.replacingOccurrences(of: "e.1", with: "f.1")
        let server = try FakeServer { index, _ in
            switch index {
            case 0: FakeServer.Answer(status: 200, body: Self.reset)
            case 5: FakeServer.Answer(status: 200, body: remade)
            case 1: FakeServer.Answer(status: 410, body: deleted)
            default: FakeServer.Answer(status: 404, body: missing)
            }
        }
        defer { server.stop() }
        var events = Self.client(server).events().makeAsyncIterator()
        var live = LiveCollection()
        var kinds: [String] = []
        for _ in 0..<3 {
            guard let event = try await events.next() else { throw TestFailure("the feed ended") }
            let update = try live.apply(event)
            switch event {
            case .reset: kinds.append("reset")
            case .changes: kinds.append("changes")
            case .missing:
                kinds.append("missing")
                #expect(live.sectionCount == 0 && live.version == nil && update.version == nil)
                #expect(update.kind == .reload && update.identifiers.sectionIDs.isEmpty)
            }
        }
        #expect(kinds == ["reset", "missing", "reset"])
        #expect(live.sections.map(\.id) == ["s"])
        #expect(server.received.count == 6, "the 404s after the deletion are waited out without more events")
    }

    /// Behind a load balancer, a server that has not applied the deletion yet answers the reset with the deleted
    /// collection's epoch: that is waited out, not shown again; the collection made again (a new epoch) is.
    @Test func aServerBehindOnADeletionDoesNotBringTheCollectionBack() async throws {
        let deleted = #"{"error":{"code":"collection_deleted","message":"deleted"}}"#
        let remade = Self.reset.replacingOccurrences(of: "e.1", with: "f.1")
        let server = try FakeServer { index, _ in
            switch index {
            case 0, 2: FakeServer.Answer(status: 200, body: Self.reset)
            case 1: FakeServer.Answer(status: 410, body: deleted)
            case 3: FakeServer.Answer(status: 404, body: #"{"error":{"code":"collection_not_found","message":""}}"#)
            default: FakeServer.Answer(status: 200, body: remade)
            }
        }
        defer { server.stop() }
        var events = Self.client(server).events().makeAsyncIterator()
        let seen = try await Self.names(of: &events, count: 3)
        #expect(seen == ["reset e.1", "missing", "reset f.1"])
        #expect(server.received.count == 5)
    }

    /// A server that answers the first poll `410 collection_deleted`, and every other request with `reset` (e.1):
    /// a server that stays behind on the deletion, or whose deleted epoch came back.
    static func deletedOnceThenStale() throws -> FakeServer {
        let deleted = #"{"error":{"code":"collection_deleted","message":"deleted"}}"#
        return try FakeServer { index, _ in
            index == 1
                ? FakeServer.Answer(status: 410, body: deleted) : FakeServer.Answer(status: 200, body: Self.reset)
        }
    }

    /// The next `count` events, each named: `reset VERSION`, `changes`, `missing`, or `end`.
    static func names(of events: inout FeedEvents.Iterator, count: Int) async throws -> [String] {
        var names: [String] = []
        for _ in 0..<count {
            switch try await events.next() {
            case .reset(let snapshot): names.append("reset \(snapshot.version)")
            case .changes: names.append("changes")
            case .missing: names.append("missing")
            case nil: names.append("end")
            }
        }
        return names
    }

    /// Resets at the deleted epoch are waited out for `staleResetPatience` only: past it the epoch came back (a
    /// crash lost the deletion) and the collection is followed again, where it was shown missing for good.
    @Test(.timeLimit(.minutes(1))) func aDeletedEpochThatCameBackIsFollowedAfterThePatience() async throws {
        let server = try Self.deletedOnceThenStale()
        defer { server.stop() }
        var client = FeedClient(
            baseURL: server.baseURL, name: "c", pollTimeout: .seconds(5),
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)))
        client.staleResetPatience = .milliseconds(600)
        var events = client.events().makeAsyncIterator()
        let started = ContinuousClock.now
        let seen = try await Self.names(of: &events, count: 3)
        #expect(seen == ["reset e.1", "missing", "reset e.1"])
        #expect(ContinuousClock.now - started >= .milliseconds(600))
        #expect(server.received.count > 3, "the stale resets were asked for again meanwhile")
    }

    /// A server that stays behind on a deletion is asked with a growing backoff, not four times a second for good.
    @Test func resetsOfADeletedCollectionBackOff() async throws {
        let server = try Self.deletedOnceThenStale()
        defer { server.stop() }
        let client = FeedClient(
            baseURL: server.baseURL, name: "c", pollTimeout: .seconds(5),
            backoff: Backoff(initial: .milliseconds(20), maximum: .seconds(10)))
        let task = Task {
            var events = client.events().makeAsyncIterator()
            while try await events.next() != nil {}
        }
        try await Task.sleep(for: .seconds(3))
        task.cancel()
        _ = try await task.value
        // Doubling from 20 ms (each wait at least half its step) gives under 12 requests in 3 s; the first wait over
        // and over gave 186.
        #expect(server.received.count < 20, "\(server.received.count) requests")
    }

    /// A name that is not there (not created yet, or wrong) is reported, once; the feed then waits for it.
    @Test func aCollectionThatIsNotThereIsReportedOnce() async throws {
        let server = try FakeServer { index, _ in
            index < 3
                ? FakeServer.Answer(status: 404, body: #"{"error":{"code":"collection_not_found","message":""}}"#)
                : FakeServer.Answer(status: 200, body: Self.reset)
        }
        defer { server.stop() }
        var events = Self.client(server).events().makeAsyncIterator()
        guard case .missing = try await events.next() else { throw TestFailure("no missing event") }
        guard case .reset = try await events.next() else { throw TestFailure("no reset") }
        #expect(server.received.count == 4)
    }

    /// A missing collection is asked for every `missingRetry`, not with the failures' backoff, which grew to 30 s
    /// (and went on from the failures of a server still starting): a collection made meanwhile was seen that late.
    @Test func aMissingCollectionIsAskedForAtASteadyPace() async throws {
        let server = try FakeServer { index, _ in
            switch index {
            case 0...2: FakeServer.Answer(status: 503, body: #"{"error":{"code":"shutting_down","message":""}}"#)
            case 3...9:
                FakeServer.Answer(status: 404, body: #"{"error":{"code":"collection_not_found","message":""}}"#)
            default: FakeServer.Answer(status: 200, body: Self.reset)
            }
        }
        defer { server.stop() }
        var client = FeedClient(
            baseURL: server.baseURL, name: "c", pollTimeout: .seconds(5),
            backoff: Backoff(initial: .milliseconds(200), maximum: .seconds(30)))
        client.missingRetry = .milliseconds(100)
        var events = client.events().makeAsyncIterator()
        guard case .missing = try await events.next() else { throw TestFailure("no missing event") }
        let missingSince = ContinuousClock.now
        guard case .reset = try await events.next() else { throw TestFailure("no reset") }
        let waited = ContinuousClock.now - missingSince
        // Six waits of 50 to 100 ms; with the backoff they would be 0.8, 1.6, 3.2, ... seconds (each at least half).
        #expect(waited < .seconds(3), "the collection was seen \(waited) after the first 404")
        #expect(server.received.count == 11)
    }

    /// A `404 route_not_found` (a base URL with a wrong path) is thrown: waiting for it would wait for good, showing
    /// an empty list as if the collection were not made yet. A `404` that is not the server's (a front's own page)
    /// is retried, as a front being deployed may answer for a moment.
    @Test func aWrongRouteIsThrownNotWaitedFor() async throws {
        let wrongRoute = try FakeServer { _, _ in
            FakeServer.Answer(status: 404, body: #"{"error":{"code":"route_not_found","message":"No route."}}"#)
        }
        defer { wrongRoute.stop() }
        var refused = Self.client(wrongRoute).events().makeAsyncIterator()
        await #expect(throws: FeedError.refused(status: 404, code: "route_not_found", message: "No route.")) {
            _ = try await refused.next()
        }
        #expect(wrongRoute.received.count == 1)
        let front = try FakeServer { index, _ in
            index < 2
                ? FakeServer.Answer(status: 404, body: "<html>Not Found</html>")
                : FakeServer.Answer(status: 200, body: Self.reset)
        }
        defer { front.stop() }
        var retried = Self.client(front).events().makeAsyncIterator()
        guard case .reset = try await retried.next() else { throw TestFailure("no reset after the front's 404s") }
        #expect(front.received.count == 3)
        // A name with a `/` is one path segment (`%2F`), which the server refuses, not another route.
        let server = try FakeServer { _, _ in
            FakeServer.Answer(status: 400, body: #"{"error":{"code":"invalid_name","message":""}}"#)
        }
        defer { server.stop() }
        var events = FeedClient(baseURL: server.baseURL, name: "a/b").events().makeAsyncIterator()
        await #expect(throws: FeedError.refused(status: 400, code: "invalid_name", message: "")) {
            _ = try await events.next()
        }
        #expect(server.received.map(\.target) == ["/v1/collections/a%2Fb/changes?timeout=25"])
    }

    /// A view that is not there is missing too: its `404` says `view_not_found`, which a collection's would not.
    @Test func aViewThatIsNotThereIsReportedOnce() async throws {
        let server = try FakeServer { index, _ in
            index < 2
                ? FakeServer.Answer(status: 404, body: #"{"error":{"code":"view_not_found","message":""}}"#)
                : FakeServer.Answer(
                    status: 200,
                    body: Self.reset.replacingOccurrences(of: #""collection":"c""#, with: #""view":"c""#))
        }
        defer { server.stop() }
        var client = FeedClient(baseURL: server.baseURL, name: "c", kind: .view, pollTimeout: .seconds(5))
        client.missingRetry = .milliseconds(20)
        var events = client.events().makeAsyncIterator()
        guard case .missing = try await events.next() else { throw TestFailure("no missing event") }
        guard case .reset = try await events.next() else { throw TestFailure("no reset") }
        #expect(server.received.map(\.target).allSatisfy { $0.hasPrefix("/v1/views/c/changes?") })
    }

    /// A mirror saved before its collection was deleted: polls from its version meet `404`s; after three, a reset asks
    /// whether the collection exists, and its `404` is reported.
    @Test func aSavedMirrorOfADeletedCollectionIsToldItIsMissing() async throws {
        let server = try FakeServer { _, _ in
            FakeServer.Answer(status: 404, body: #"{"error":{"code":"collection_not_found","message":""}}"#)
        }
        defer { server.stop() }
        var events = Self.client(server).events(resumingFrom: Version("e.1")).makeAsyncIterator()
        guard case .missing = try await events.next() else { throw TestFailure("no missing event") }
        let feedRequests = server.received.filter { $0.target.hasPrefix("/v1/") }
        #expect(feedRequests.map { $0.target.contains("since=") } == [true, true, true, false])
    }

    /// A poll that may go on a new connection (resumed from a cursor, and after a failure) is a short one, which
    /// the server answers at once: on Linux a held poll as the first request on a new connection made
    /// FoundationNetworking wake without end until answered (`FeedEvents.Iterator.recovering`). No other request
    /// goes first.
    @Test func aPollThatMayOpenAConnectionIsAShortOne() async throws {
        let server = try FakeServer { index, _ in
            switch index {
            case 0: FakeServer.Answer(status: 503, body: #"{"error":{"code":"shutting_down","message":""}}"#)
            case 1: FakeServer.Answer(status: 404, body: "not here")
            default: FakeServer.Answer(status: 200, body: Self.reset.replacingOccurrences(of: "e.1", with: "e.2"))
            }
        }
        defer { server.stop() }
        var client = Self.client(server)
        client.backoff = Backoff(initial: .milliseconds(10), maximum: .milliseconds(20))
        var events = client.events(resumingFrom: Version("e.1")).makeAsyncIterator()
        _ = try await events.next()
        #expect(
            server.received.map(\.target) == Array(repeating: "/v1/collections/c/changes?since=e.1&timeout=0", count: 3)
        )
    }

    /// Only a cache that ignores the query string answers a poll with `since` with a reset; answering every poll so
    /// must not make the client spin, nor reload the same snapshot again and again.
    @Test func resetsAnsweredToPollsWithSinceDoNotSpin() async throws {
        let server = try FakeServer { _, _ in FakeServer.Answer(status: 200, body: Self.reset) }
        defer { server.stop() }
        let client = Self.client(server)
        let task = Task {
            var events = client.events().makeAsyncIterator()
            var count = 0
            while try await events.next() != nil { count += 1 }
            return count
        }
        // Three requests seen, so two answers taken (a loaded machine can hold the client's task for seconds), then
        // a second more in which a spinning client would make thousands.
        #expect(await Self.seen(server, requests: 3))
        try await Task.sleep(for: .seconds(1))
        task.cancel()
        #expect(try await task.value == 1, "one reset, not one per answer")
        #expect(Self.inTheFirstSecond(server.received) < 40)
    }

    /// Whether `server` saw at least `count` requests within a minute, awaited without holding a thread of the
    /// cooperative pool (the client's task needs one).
    static func seen(_ server: FakeServer, requests count: Int) async -> Bool {
        await waitUntil(timeout: 60) { () async in server.received.count >= count }
    }

    /// How many of `received` came within a second of the first: a rate that a held-up client only lowers.
    static func inTheFirstSecond(_ received: [(target: String, at: ContinuousClock.Instant)]) -> Int {
        guard let first = received.first?.at else { return 0 }
        return received.filter { $0.at - first < .seconds(1) }.count
    }

    @Test func a408IsRetried() async throws {
        let server = try FakeServer { index, _ in
            index == 0
                ? FakeServer.Answer(status: 408, body: "Request Timeout")
                : FakeServer.Answer(status: 200, body: Self.reset)
        }
        defer { server.stop() }
        var events = Self.client(server).events().makeAsyncIterator()
        guard case .reset = try await events.next() else { throw TestFailure("no reset") }
        #expect(server.received.count == 2)
    }

    /// A `Retry-After` past `Duration`'s range trapped in `Task.sleep`; it is taken as an hour, and cancelling
    /// still ends the wait at once.
    @Test func aHugeRetryAfterDoesNotTrap() async throws {
        let server = try FakeServer { _, _ in
            FakeServer.Answer(
                status: 503, headers: ["Retry-After": "\(Int.max)"], body: #"{"error":{"code":"x","message":""}}"#)
        }
        defer { server.stop() }
        let client = Self.client(server)
        let task = Task {
            var events = client.events().makeAsyncIterator()
            return try await events.next()
        }
        #expect(await Self.seen(server, requests: 1))
        try await Task.sleep(for: .milliseconds(500))
        task.cancel()
        #expect(try await task.value == nil)
        #expect(server.received.count == 1)
    }

    /// The requests of a client (`client` set up by `configure`) following a fake server that answers a reset, then
    /// empty answers at once: until three requests are seen, and a second more.
    static func followQuickEmptyAnswers(_ configure: (inout FeedClient) -> Void = { _ in }) async throws
        -> [(target: String, at: ContinuousClock.Instant)]
    {
        let server = try FakeServer { index, _ in
            FakeServer.Answer(
                status: 200,
                body: index == 0
                    ? Self.reset
                    : Self.changes(#"{"deleted":[],"inserted":[],"moved":[],"updated":[]}"#, from: "e.1", to: "e.1"))
        }
        defer { server.stop() }
        var client = Self.client(server)
        configure(&client)
        let task = Task { [client] in
            var events = client.events().makeAsyncIterator()
            _ = try await events.next()
            return try await events.next()
        }
        #expect(await Self.seen(server, requests: 3))
        try await Task.sleep(for: .seconds(1))
        task.cancel()
        _ = try await task.value
        return server.received
    }

    @Test func quickEmptyAnswersDoNotSpin() async throws {
        let received = try await Self.followQuickEmptyAnswers()
        // The first quick empty answer is polled again at once, the next ones back off (20 ms doubling to 100 ms,
        // each wait at least half its step): at most about 22 polls in a second. A loop that spun would make
        // thousands.
        #expect(received.count >= 3)
        #expect(Self.inTheFirstSecond(received) < 40)
    }

    /// A `pollTimeout` under a second is sent as `timeout=1`: with `timeout=0` every answer came back at once and
    /// none counted as quick, so the loop polled as fast as the server answered.
    @Test func aZeroPollTimeoutDoesNotSpin() async throws {
        let received = try await Self.followQuickEmptyAnswers { $0.pollTimeout = .zero }
        #expect(received.first?.target == "/v1/collections/c/changes?timeout=1")
        #expect(received.count >= 3)
        #expect(Self.inTheFirstSecond(received) < 40)
    }

    /// After a `410` and its reset, the first quick empty answer is polled again at once, as every first one is
    /// (a `410` once left the count of quick answers at 1, so that the late client waited and stayed late).
    @Test func theFirstQuickEmptyAnswerAfterAGoneIsPolledAtOnce() async throws {
        let gone = #"{"error":{"code":"cursor_expired","message":"expired","current":"e.1"}}"#
        let empty = Self.changes(#"{"deleted":[],"inserted":[],"moved":[],"updated":[]}"#, from: "e.1", to: "e.1")
        let server = try FakeServer { index, _ in
            switch index {
            case 0, 2: FakeServer.Answer(status: 200, body: Self.reset)
            case 1: FakeServer.Answer(status: 410, body: gone)
            default: FakeServer.Answer(status: 200, body: empty)
            }
        }
        defer { server.stop() }
        let client = FeedClient(
            baseURL: server.baseURL, name: "c", pollTimeout: .seconds(5),
            backoff: Backoff(initial: .seconds(30), maximum: .seconds(60)))
        let task = Task {
            var events = client.events().makeAsyncIterator()
            for _ in 0..<3 { _ = try await events.next() }
        }
        // Requests 0-4 need no wait: reset, 410, reset, the first quick empty answer, and its re-poll; the second
        // quick empty answer (request 4) waits at least 15 s, far from a loaded machine's delays.
        let deadline = ContinuousClock.now + .seconds(60)
        while server.received.count < 5, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        task.cancel()
        _ = try await task.value
        let times = server.received.map(\.at)
        #expect(times.count == 5)
        if times.count >= 5 { #expect(times[4] - times[3] < .seconds(10)) }
    }
}
