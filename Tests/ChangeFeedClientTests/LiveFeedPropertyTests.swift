import ChangeFeedClient
import Foundation
import Model
import ProcessSupport
import Testing

/// Random histories against a live server while a `FeedClient` follows: after every step the mirror equals the
/// server's snapshot, and every event's update value, applied as one batch to the UIKit model, reproduces it.
@Suite("LiveFeedPropertyTests", .tags(.liveServer), .serialized, .timeLimit(.minutes(10)))
struct LiveFeedPropertyTests {
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func randomHistories(seed: UInt64) async throws {
        let history = 6
        let server = try await ServerProcess.started(["--history", "\(history)"])
        let http = TestHTTP(baseURL: server.baseURL)
        var random = RandomHistory(seed: seed)
        let path = "/v1/collections/c\(seed)"
        // One section longer than a mirror chunk (64 items), so that batches cross chunks.
        let long = Section(id: "long", items: random.items(1300))
        try await http.mutate("PUT", path, "{\"sections\":\(bodyText(random.sections(3, maxItems: 5) + [long]))}")
        let client = FeedClient(
            baseURL: server.baseURL, name: "c\(seed)", pollTimeout: .seconds(5),
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)))
        var follower = Follower(client)
        try await follower.catchUp(to: try await http.snapshot(path).version)
        var expiries = 0
        var recreations = 0
        for _ in 0..<120 {
            var content = try await http.snapshot(path).sections
            switch random.int(0...19) {
            case 0:
                // More mutations than the history keeps: the follower's cursor expires.
                expiries += 1
                for _ in 0...history {
                    let sections = bodyText(random.sections(1, maxItems: 2))
                    let op =
                        "{\"op\":\"insertSections\",\"at\":\(random.int(0...content.count)),\"sections\":\(sections)}"
                    try await http.mutate("POST", path + "/mutations", "{\"ops\":[\(op)]}")
                    content = try await http.snapshot(path).sections
                }
            case 1:
                recreations += 1
                try await http.mutate("DELETE", path)
                try await http.mutate("PUT", path, "{\"sections\":\(bodyText(random.sections(2, maxItems: 4)))}")
            case 2...4:
                try await http.mutate("PUT", path, "{\"sections\":\(bodyText(random.edited(content)))}")
            case 5...7:
                let id = random.randomItem(in: content).map { content[$0.0].items[$0.1].id } ?? random.freshID("i")
                let placement =
                    content.isEmpty || random.chance(50)
                    ? "" : ",\"section\":\(random.int(0...content.count - 1))"
                try await http.mutate("PUT", "\(path)/items/\(id)", "{\"data\":\(random.data())\(placement)}")
            default:
                for _ in 0..<random.int(1...3) {
                    guard let op = random.op(on: content) else { continue }
                    try await http.mutate("POST", path + "/mutations", "{\"ops\":[\(op)]}")
                    content = try await http.snapshot(path).sections
                }
            }
            let snapshot = try await http.snapshot(path)
            try await follower.catchUp(to: snapshot.version)
            #expect(follower.live.sections == snapshot.sections)
        }
        #expect(follower.changesets > 20)
        #expect(follower.resets == 1 + expiries + recreations)
        await server.stopped()
    }
}
