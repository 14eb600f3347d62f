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
}
