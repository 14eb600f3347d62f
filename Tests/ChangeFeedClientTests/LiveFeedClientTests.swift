import ChangeFeedClient
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client loop against a live server: cancellation, restarts, expiry, saved mirrors, views.
@Suite("LiveFeedClientTests", .tags(.liveServer), .serialized, .timeLimit(.minutes(10)))
struct LiveFeedClientTests {
    static let fastBackoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))

    static func client(_ server: ServerProcess, _ name: String, kind: FeedClient.Kind = .collection) -> FeedClient {
        FeedClient(baseURL: server.baseURL, name: name, kind: kind, pollTimeout: .seconds(30), backoff: fastBackoff)
    }

    static let items = #"{"sections":[{"id":"s","items":[{"id":"a"},{"id":"b","data":{"n":1}}]}]}"#

    @Test func cancellationEndsAHeldPollAtOnce() async throws {
        let server = try await ServerProcess.started()
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate("PUT", "/v1/collections/c", Self.items)
        let client = Self.client(server, "c")
        let task = Task {
            var events = client.events().makeAsyncIterator()
            _ = try await events.next()  // the reset
            return try await events.next()  // held: nothing changes
        }
        // Wait until the poll is held by the server. Up to 120 s: in the full suite the synchronous tests of other
        // suites can hold both threads of the cooperative pool, which the client's task needs, for a minute or more.
        #expect(await waitUntil(timeout: 120) { await server.heldPolls() == 1 })
        // Timed by the server letting the poll go: the request is cancelled on URLSession's own threads, so this
        // holds however busy the cooperative pool is with other suites (the task itself ends when it gets a thread).
        let start = ContinuousClock.now
        task.cancel()
        let released = waitUntil(timeout: 10) { server.heldPollsNow() == 0 }
        let elapsed = ContinuousClock.now - start
        #expect(released)
        // Alone it takes a few milliseconds (the issue's bound is 100 ms); the whole suite runs other suites in
        // parallel on two cores, where just over a second was seen (1.006 s once), so the bound here is five
        // seconds: still far below the 30 s the poll would be held without the cancellation.
        #expect(elapsed < .seconds(5), "cancellation took \(elapsed)")
        let last = try await task.value
        #expect(last == nil)
        await server.stopped()
    }

    /// Once a server that refused a held poll (`429` at `--max-held-polls`) takes them again, the feed is `.live`
    /// within seconds: the held poll after the short one is held 2 s at most. Held for the feed's whole timeout
    /// (30 s here), a "reconnecting" banner stayed up that long after the server had room again.
    @Test func afterRefusedHeldPollsTheFeedIsLiveWithinSeconds() async throws {
        let server = try await ServerProcess.started(["--max-held-polls", "1", "--log-level", "info"])
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate("PUT", "/v1/collections/c", Self.items)
        let version = try await http.snapshot("/v1/collections/c").version
        // Another client's poll takes the only place.
        let other = Task { try await http.send("GET", "/v1/collections/c/changes?since=\(version)&timeout=60") }
        #expect(await waitUntil(timeout: 60) { await server.heldPolls() == 1 })
        let heard = Mutex<[FeedStatus]>([])
        let client = Self.client(server, "c")
        let task = Task {
            var events = client.events(onStatus: { status in heard.withLock { $0.append(status) } }).makeAsyncIterator()
            while try await events.next() != nil {}
        }
        #expect(await waitUntil(timeout: 60) { heard.withLock { $0.count >= 4 } }, "refused a few times")
        // The other client goes, and the place is free; nothing changes, so the feed's held poll is answered only
        // when its timeout ends.
        // Timed from the cancellation, which frees the place a moment later: the feed's own held poll may take it at
        // once, so a wait for no held poll at all could miss its moment (it did in a busy CI run, and waited 60 s).
        other.cancel()
        let freed = ContinuousClock.now
        #expect(await waitUntil(timeout: 60) { heard.withLock { $0.last } == .live })
        let elapsed = ContinuousClock.now - freed
        task.cancel()
        _ = try await task.value
        let statuses = heard.withLock { $0 }
        #expect(
            statuses.prefix(3) == [.connecting, .live, statuses[2]]
                && statuses.dropFirst(2).dropLast().allSatisfy {
                    if case .retrying = $0 { return true } else { return false }
                }, "\(statuses)")
        // The backoff after the last refusal is at most 200 ms here, the held poll after it 2 s; held for the whole
        // timeout, 30 s. The bound leaves room for a cooperative pool that other suites keep busy.
        #expect(elapsed < .seconds(25), "live again \(elapsed) after the place was free; the poll's timeout is 30 s")
        // The server's own timing, whatever the client's threads: a poll held about 2 s, answered empty (its line
        // is logged by the log's thread, a moment after the answer).
        func heldBriefly() -> Bool {
            server.log.split(separator: "\n").contains { line in
                guard line.contains("GET /v1/collections/c/changes 200 "), let last = line.split(separator: " ").last,
                    let milliseconds = Int(last.dropLast(2))
                else { return false }
                return (1500...4000).contains(milliseconds)
            }
        }
        #expect(await waitUntil(timeout: 10) { heldBriefly() }, "no poll held about 2 s: \(server.log.suffix(1500))")
        await server.stopped()
    }

    /// On Linux, a request cancelled while FoundationNetworking looked in its `URLCache` trapped the process (seen
    /// within a few hundred rounds with `URLSession.shared`); the default session has no cache.
    @Test func stoppingAFollowerAtAnyMomentDoesNotCrash() async throws {
        let server = try await ServerProcess.started()
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate("PUT", "/v1/collections/c", Self.items)
        let client = Self.client(server, "c")
        var events = 0
        for _ in 0..<1500 {
            let task = Task {
                var iterator = client.events().makeAsyncIterator()
                return try await iterator.next()
            }
            try await Task.sleep(for: .microseconds(Int.random(in: 0...2000)))
            task.cancel()
            if try await task.value != nil { events += 1 }
        }
        #expect(events > 0, "some followers got their reset before they were stopped")
        await server.stopped()
    }

    /// Over HTTP/1.1 each feed holds a connection while its poll is held. With a session's default of 6 per host, a
    /// seventh feed's poll queued behind the others', and its changes came up to a whole poll timeout late.
    @Test func tenFeedsOfOneServerAreAllLive() async throws {
        let server = try await ServerProcess.started()
        let http = TestHTTP(baseURL: server.baseURL)
        let names = (0..<10).map { "feed\($0)" }
        for name in names { try await http.mutate("PUT", "/v1/collections/\(name)", Self.items) }
        // Each follower ends with the moment its first changeset came.
        let followers = names.map { name in
            let client = Self.client(server, name)
            return Task { () throws -> ContinuousClock.Instant? in
                for try await event in client.events() {
                    if case .changes = event { return ContinuousClock.now }
                }
                return nil
            }
        }
        #expect(await waitUntil(timeout: 120) { await server.heldPolls() == names.count })
        let started = ContinuousClock.now
        for name in names.suffix(3) {
            try await http.mutate("PUT", "/v1/collections/\(name)/items/new", #"{"section":"s","data":1}"#)
        }
        // The polls are held 30 s: changes that came within 20 s came to held polls, not to the next ones.
        for follower in followers.suffix(3) {
            let came = try await follower.value
            #expect(came.map { $0 - started < .seconds(20) } == true, "came \(String(describing: came)) vs \(started)")
        }
        for follower in followers.prefix(7) { follower.cancel() }
        for follower in followers.prefix(7) { _ = try? await follower.value }
        await server.stopped()
    }

    @Test func aRestartMidStreamResumesWithoutAReset() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await ServerProcess.started(["--fsync", "always"], dataDirectory: directory)
        let port = first.port
        let http = TestHTTP(baseURL: first.baseURL)
        try await http.mutate("PUT", "/v1/collections/c", Self.items)
        var follower = Follower(Self.client(first, "c"))
        try await follower.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        try await http.mutate("POST", "/v1/collections/c/mutations", #"{"ops":[{"op":"deleteItems","items":["a"]}]}"#)
        try await follower.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        // Stop the server while the follower's next poll is held, then start it again on the same port.
        let pulling = Task { [follower] in
            var follower = follower
            let event = try await follower.events.next()
            return (event, follower)
        }
        // 120 s: in the full suite on two busy cores, the blocking waits of other suites' servers can hold up the
        // cooperative threads the poll's task needs (once more than 10 s, and 10 s was seen to fail elsewhere).
        #expect(await waitUntil(timeout: 120) { await first.heldPolls() == 1 })
        #expect(await first.stopped() == 0)
        let second = try await ServerProcess.started(
            ["--fsync", "always", "--port", "\(port)"], dataDirectory: directory)
        try await http.mutate(
            "POST", "/v1/collections/c/mutations", #"{"ops":[{"op":"updateItems","items":[{"id":"b","data":2}]}]}"#)
        let (event, resumed) = try await pulling.value
        follower = resumed
        guard let event else { throw TestFailure("the feed ended") }
        guard case .changes = event else { throw TestFailure("a reset after the restart: \(event)") }
        try follower.apply(event)
        let snapshot = try await http.snapshot("/v1/collections/c")
        #expect(follower.live.version.map { "\($0)" } == snapshot.version)
        #expect(follower.live.sections == snapshot.sections)
        #expect(follower.resets == 1)
        await second.stopped()
    }

    @Test func anExpiredCursorGivesOneReset() async throws {
        let server = try await ServerProcess.started(["--history", "2"])
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate("PUT", "/v1/collections/c", Self.items)
        var follower = Follower(Self.client(server, "c"))
        try await follower.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        for n in 0..<5 {
            try await http.mutate(
                "POST", "/v1/collections/c/mutations",
                #"{"ops":[{"op":"insertItems","at":[0,0],"items":[{"id":"x\#(n)"}]}]}"#)
        }
        try await follower.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        #expect(follower.resets == 2)
        try await http.mutate("POST", "/v1/collections/c/mutations", #"{"ops":[{"op":"deleteItems","items":["x0"]}]}"#)
        try await follower.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        #expect(follower.resets == 2)
        #expect(follower.changesets == 1)
        #expect(follower.live.sections == (try await http.snapshot("/v1/collections/c")).sections)
        await server.stopped()
    }

    @Test func aSavedMirrorResumesFromItsCursor() async throws {
        let server = try await ServerProcess.started(["--history", "3"])
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate("PUT", "/v1/collections/c", Self.items)
        var follower = Follower(Self.client(server, "c"))
        try await follower.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        let saved = try JSONEncoder().encode(follower.live)
        try await http.mutate(
            "POST", "/v1/collections/c/mutations", #"{"ops":[{"op":"moveItem","item":"b","to":[0,0]}]}"#)

        // Relaunch: restore and resume from the saved version; the changes since come, no reset.
        let restored = try JSONDecoder().decode(LiveCollection.self, from: saved)
        #expect(restored.sections == follower.live.sections)
        var relaunched = Follower(Self.client(server, "c"), resumingFrom: restored.version, live: restored)
        try await relaunched.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        #expect(relaunched.resets == 0)
        #expect(relaunched.changesets == 1)
        #expect(relaunched.live.sections == (try await http.snapshot("/v1/collections/c")).sections)

        // A saved cursor the server no longer keeps falls back to a reset.
        for n in 0..<5 {
            try await http.mutate("PUT", "/v1/collections/c/items/n\(n)", #"{"data":\#(n)}"#)
        }
        var stale = Follower(
            Self.client(server, "c"), resumingFrom: restored.version,
            live: try JSONDecoder().decode(LiveCollection.self, from: saved))
        try await stale.catchUp(to: try await http.snapshot("/v1/collections/c").version)
        #expect(stale.resets == 1)
        #expect(stale.live.sections == (try await http.snapshot("/v1/collections/c")).sections)
        await server.stopped()
    }

    @Test func followingAViewMirrorsItsSnapshot() async throws {
        let server = try await ServerProcess.started()
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate(
            "PUT", "/v1/collections/tasks",
            #"{"sections":[{"id":"s","items":[{"id":"t1","data":{"status":"open","priority":3}},"#
                + #"{"id":"t2","data":{"status":"open","priority":1}},{"id":"t3","data":{"status":"doing","priority":2}}]}]}"#
        )
        try await http.mutate(
            "PUT", "/v1/views/board",
            #"{"source":"tasks","sectionBy":{"field":"/status"},"sortBy":[{"field":"/priority","order":"desc"}]}"#)
        var follower = Follower(Self.client(server, "board", kind: .view))
        try await follower.catchUp(to: try await http.snapshot("/v1/views/board").version)
        var random = RandomHistory(seed: 42)
        for step in 0..<30 {
            let id = "t\(random.int(1...8))"
            let status = ["open", "doing", "done"][random.int(0...2)]
            if random.chance(20) {
                try await http.mutate("DELETE", "/v1/collections/tasks/items/\(id)", expect: [200, 404])
            } else {
                try await http.mutate(
                    "PUT", "/v1/collections/tasks/items/\(id)",
                    #"{"data":{"status":"\#(status)","priority":\#(random.int(0...5)),"step":\#(step)}}"#)
            }
            let snapshot = try await http.snapshot("/v1/views/board")
            try await follower.catchUp(to: snapshot.version)
            #expect(follower.live.sections == snapshot.sections)
        }
        #expect(follower.resets == 1)
        #expect(follower.changesets >= 20)
        await server.stopped()
    }
}

extension ServerProcess {
    /// The same, blocking the calling thread (for timing a cancellation without waiting for the cooperative pool).
    func heldPollsNow() -> Int {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/metrics")!)
        request.timeoutInterval = 5
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var text = ""
        session.dataTask(with: request) { data, _, _ in
            text = String(decoding: data ?? Data(), as: UTF8.self)
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 30)  // the request gives up after 5 s
        let line = text.split(separator: "\n").first { $0.hasPrefix("changeserver_held_polls ") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? -1
    }

    /// The server's held polls now, from `/metrics` (-1 when it cannot be read).
    func heldPolls() async -> Int { await metric("changeserver_held_polls") }

    /// The changesets the server has delivered to polls and streams, from `/metrics` (-1 when it cannot be read).
    func delivered() async -> Int { await metric("changeserver_changesets_delivered_total") }

    private func metric(_ name: String) async -> Int {
        guard let answer = try? await TestHTTP(baseURL: baseURL).send("GET", "/metrics") else { return -1 }
        let text = String(decoding: answer.body, as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? -1
    }
}
