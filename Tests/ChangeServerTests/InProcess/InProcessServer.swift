import Foundation
import Model
import Testing

@testable import ChangeServer

/// The application without sockets or event loops: routes are called with plain `Request` values and their answers
/// collected from a `Connection`, so every route and error can be checked in milliseconds. Storage is real: a
/// journal in a temporary directory, removed at the end.
final class InProcessServer {
    let app: App
    let directory: String

    init(_ arguments: [String] = [], recordLimit: Int = JournalFormat.maximumPayload) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("inprocess-\(UUID().uuidString)").path
        let config = try #require(
            try Config.parse(
                arguments: ["--data-dir", directory, "--fsync", "never", "--log-level", "warning"] + arguments,
                environment: [:]
            ).config)
        app = try App.open(config: config, logger: Logger(level: config.logLevel), recordLimit: recordLimit)
        app.startServing()
    }

    deinit {
        app.finish()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Sends a request and waits (at most 10 s) for its answer. A poll the feed would hold comes back as `held`; an
    /// event stream as a `200` with the bytes it starts with.
    func send(
        _ method: String, _ target: String, body: String? = nil, headers: [(String, String)] = []
    ) -> Answer {
        let parts = target.split(separator: "?", maxSplits: 1)
        let query = parts.count > 1 ? Self.queryPairs(parts[1]) : []
        let request = Request(
            method: method, path: String(parts.first ?? ""), query: query,
            headers: headers.map { (name: $0.0, value: $0.1) }, body: Array((body ?? "").utf8))
        return answer(request)
    }

    /// Routes `request` (as screened from its headers when `screened` is set) and waits for its answer.
    func answer(_ request: Request, screened: Route? = nil) -> Answer {
        let connection = RecordingConnection()
        switch app.handle(request, screened: screened, on: connection).result {
        case .respond(let response): return Answer(response)
        case .later: return connection.wait()
        case .stream(let start):
            return Answer(start, app.feedCaching)
        }
    }

    private static func queryPairs(_ text: Substring) -> [(name: String, value: String)] {
        text.split(separator: "&").map { pair in
            let halves = pair.split(separator: "=", maxSplits: 1)
            return (String(halves[0]), halves.count > 1 ? String(halves[1]) : "")
        }
    }
}

/// What a route answered.
struct Answer {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// Set when the feed would hold the request: the version it waits from and its timeout.
    var held: (since: Version, timeout: Int)?
    /// The response's share when it is one the server builds once and queues for many requests.
    var share: ObjectIdentifier?
    /// The large body held apart (`ResponseBytes`) that the response is sent from, shared by the answers made of it;
    /// held as an answer being sent holds it.
    var sharedBody: ResponseBytes?
    /// The `event: reset` an event stream starts with, shared by the streams opened at its version.
    var streamReset: StreamReset?

    init(_ response: Response) {
        status = response.status.rawValue
        headers = response.headers
        body = response.sharedBody.map { Array($0.bytes) } ?? response.body
        share = response.share.map(ObjectIdentifier.init)
        sharedBody = response.sharedBody
    }

    /// An event stream's answer: a `200` with the bytes it starts with.
    init(_ stream: StreamStart, _ caching: FeedCaching) {
        self.init(Response(.ok, headers: ServerSentEvents.headers(caching), body: stream.bytes))
        streamReset = stream.reset
    }

    init(held since: Version, timeout: Int) {
        status = 0
        headers = []
        body = []
        held = (since, timeout)
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A `Connection` that records the answer (from whichever thread gives it) or the hold.
final class RecordingConnection: Connection, @unchecked Sendable {
    // @unchecked: `answered` is guarded by `lock`; the semaphore is thread-safe.
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private var answered: Answer?

    func answer(_ response: Response) {
        finish(Answer(response))
    }

    func startStream(_ start: StreamStart) {
        finish(Answer(start, FeedCaching(isShared: true)))
    }

    func claimCommit() -> Bool { true }

    var isAbandoned: Bool { false }

    func hold(on subject: FeedSubject, since: Version, timeout: Int, cursor: Int64?) {
        finish(Answer(held: since, timeout: timeout))
    }

    private func finish(_ answer: Answer) {
        lock.withLock { answered = answer }
        done.signal()
    }

    func wait() -> Answer {
        guard done.wait(timeout: .now() + 10) == .success else {
            return Answer(Response(.internalServerError, body: Array("no answer within 10 s".utf8)))
        }
        return lock.withLock { answered } ?? Answer(Response(.internalServerError))
    }
}
