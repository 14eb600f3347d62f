import Foundation
import ProcessSupport
import Testing

/// The example follower (`Examples/FeedFollower`) against a live server: it prints each event and finds its
/// mirror equal to the snapshot.
@Suite("LiveExampleTests", .tags(.liveServer), .timeLimit(.minutes(10)))
struct LiveExampleTests {
    @Test func theFollowerPrintsEventsAndChecksItsMirror() async throws {
        let server = try await ServerProcess.started()
        let http = TestHTTP(baseURL: server.baseURL)
        try await http.mutate("PUT", "/v1/collections/inbox", #"{"sections":[{"id":"s","items":[{"id":"a"}]}]}"#)
        let follower = Process()
        follower.executableURL = ServerProcess.binary.deletingLastPathComponent().appendingPathComponent("FeedFollower")
        follower.arguments = [server.baseURL.absoluteString, "inbox", "--count", "3"]
        let output = try Spawning.run(follower) {
            let pipe = Pipe()
            follower.standardOutput = pipe
            return pipe
        }
        // Its poll held, so it has its reset; each write goes once the one before was delivered alone (a held poll
        // answered late would take both as one changeset).
        #expect(await waitUntil(timeout: 60) { await server.heldPolls() == 1 })
        for (index, id) in ["b", "c"].enumerated() {
            try await http.mutate("PUT", "/v1/collections/inbox/items/\(id)", #"{"data":1}"#)
            #expect(await waitUntil(timeout: 60) { await server.delivered() == index + 1 })
        }
        #expect(try await onOwnThread { waitForExit(of: follower, timeout: 60) })
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(follower.terminationStatus == 0, "\(text)")
        #expect(text.contains("reset to "))
        #expect(text.components(separatedBy: "items -0 +1 ~0").count == 3, "\(text)")
        #expect(!text.contains("MISMATCH"))
        #expect(text.components(separatedBy: "mirror matches").count >= 2, "\(text)")
        await server.stopped()
    }

    /// The follower is idle while its poll is held after the server came back. FoundationNetworking keeps the
    /// write-readiness source it made while connecting, so the first request on a new connection woke it without
    /// end: the held poll after a restart took a whole core for its time (`FeedEvents.Iterator` opens the
    /// connection with a short request first). Measured on the follower's own process, over a held poll.
    @Test func aFollowerDoesNotSpinWhileItsPollIsHeldAfterARestart() async throws {
        let data = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: data) }
        let first = try await ServerProcess.started(dataDirectory: data)
        let port = first.port
        try await TestHTTP(baseURL: first.baseURL).mutate("PUT", "/v1/collections/inbox", #"{"sections":[]}"#)
        let follower = try Self.startedFollower([first.baseURL.absoluteString, "inbox"])
        defer {
            kill(follower.processIdentifier, SIGKILL)
            follower.waitUntilExit()
        }
        #expect(await waitUntil(timeout: 60) { await first.heldPolls() == 1 })
        await first.stopped()
        let second = try await ServerProcess.started(["--port", "\(port)"], dataDirectory: data)
        #expect(await waitUntil(timeout: 60) { await second.heldPolls() == 1 })
        let used = try await Self.ticksOverThreeSeconds(of: follower.processIdentifier)
        #expect(await second.heldPolls() == 1, "the poll was not held all along")
        // A spinning follower takes most of the 300 ticks; an idle one, none.
        #expect(used < 60, "the follower used \(used) ticks of CPU in 3 s while its poll was held")
        await second.stopped()
    }

    /// Feeds started together in one process stay idle while their polls are held. Sharing one session on Linux,
    /// a feed's held poll could land on a connection opened for it (another feed had taken the one its first
    /// request opened), and the process took 0.8 of a core for the poll's 25 s (`FeedClient.sessionOfItsOwn`).
    @Test func feedsStartedTogetherDoNotSpinWhileTheirPollsAreHeld() async throws {
        let server = try await ServerProcess.started()
        for name in ["a", "b", "c", "d"] {
            try await TestHTTP(baseURL: server.baseURL).mutate("PUT", "/v1/collections/\(name)", #"{"sections":[]}"#)
        }
        let follower = try Self.startedFollower([server.baseURL.absoluteString, "a", "b", "c", "d"])
        defer {
            kill(follower.processIdentifier, SIGKILL)
            follower.waitUntilExit()
        }
        #expect(await waitUntil(timeout: 60) { await server.heldPolls() == 4 })
        let used = try await Self.ticksOverThreeSeconds(of: follower.processIdentifier)
        #expect(await server.heldPolls() == 4, "the polls were not held all along")
        #expect(used < 60, "four feeds used \(used) ticks of CPU in 3 s while their polls were held")
        await server.stopped()
    }

    /// `FeedFollower` running with `arguments`, its output dropped; the caller kills it.
    static func startedFollower(_ arguments: [String]) throws -> Process {
        let follower = Process()
        follower.executableURL = ServerProcess.binary.deletingLastPathComponent().appendingPathComponent("FeedFollower")
        follower.arguments = arguments
        follower.standardOutput = FileHandle.nullDevice
        try Spawning.run(follower)
        return follower
    }

    /// The CPU ticks (of 100 a second) the process uses over the next 3 s.
    static func ticksOverThreeSeconds(of pid: Int32) async throws -> Int {
        let before = try #require(cpuTicks(of: pid))
        try await Task.sleep(for: .seconds(3))
        return try #require(cpuTicks(of: pid)) - before
    }

    /// User and system CPU time of a process so far, in clock ticks (`/proc/PID/stat`).
    static func cpuTicks(of pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = text.lastIndex(of: ")")
        else { return nil }
        // After the command's closing parenthesis: state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: end)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }
}
