import ChangeFeedClient
import Foundation
import Model
import ProcessSupport
import Testing

/// The client's requests when the network misbehaves between it and the server, against a scripted peer on
/// 127.0.0.1. On Linux FoundationNetworking trapped on an answer cut inside its headers, sent a request again on
/// its own when a kept-alive connection died before the answer (a `DELETE` applied twice and reported refused), and
/// spun while a connection went unanswered; the client's own connections (`SocketHTTP`) do none of that.
@Suite("LiveTransportTests", .tags(.liveServer), .serialized, .timeLimit(.minutes(5)))
struct LiveTransportTests {
    /// A peer that reads requests and does with each what `script` says for its index (from 0), on as many
    /// connections as come, until `stop()`.
    final class ScriptedPeer: @unchecked Sendable {
        // @unchecked: `requests`, `held` and `stopped` are guarded by `lock`; the rest is set once in init.
        enum Step {
            /// `200` with this JSON body, the connection kept open for the next request.
            case answer(String)
            /// These bytes, then the connection closes.
            case raw(String)
            /// Nothing: the connection stays open, unanswered, until `stop()`.
            case silence
            /// The whole peer goes, as a server that crashed once it read the request: its listener takes no
            /// connection after it (a connect is refused), and this one closes unanswered.
            case vanish
        }

        let port: Int
        private let listener: Int32
        private let script: @Sendable (Int) -> Step
        private let lock = NSLock()
        private var requests: [String] = []
        private var held: [Int32] = []
        private var stopped = false
        private let finished = DispatchSemaphore(value: 0)

        init(_ script: @escaping @Sendable (Int) -> Step) throws {
            self.script = script
            (listener, port) = try loopbackListener()
            Thread.detachNewThread { [self] in serve() }
        }

        var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

        /// The request lines received so far.
        var received: [String] { lock.withLock { requests } }

        func stop() {
            lock.withLock { stopped = true }
            if finished.wait(timeout: .now() + 30) == .timedOut { Issue.record("the peer did not stop") }
            for connection in lock.withLock({ held }) { close(connection) }
            close(listener)
        }

        private var isStopped: Bool { lock.withLock { stopped } }

        private func serve() {
            while !isStopped {
                var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 50) > 0 else { continue }
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { continue }
                Thread.detachNewThread { [self] in converse(on: connection) }
            }
            finished.signal()
        }

        /// Answers the requests of one connection as the script says.
        private func converse(on connection: Int32) {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !isStopped {
                guard let end = Self.find([13, 10, 13, 10], in: pending) else {
                    var ready = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
                    guard poll(&ready, 1, 50) > 0 else { continue }
                    let count = read(connection, &buffer, buffer.count)
                    guard count > 0 else { break }
                    pending += buffer[..<count]
                    continue
                }
                let head = String(decoding: pending[..<end], as: UTF8.self)
                let length =
                    head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                guard pending.count >= end + 4 + length else {
                    let count = read(connection, &buffer, buffer.count)
                    guard count > 0 else { break }
                    pending += buffer[..<count]
                    continue
                }
                pending.removeFirst(end + 4 + length)
                let index = lock.withLock {
                    requests.append(head.components(separatedBy: "\r\n").first ?? "")
                    return requests.count - 1
                }
                switch script(index) {
                case .answer(let body):
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    let bytes = Array((head + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
                    _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                case .raw(let text):
                    _ = Array(text.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                    close(connection)
                    return
                case .silence:
                    lock.withLock { held.append(connection) }
                    return
                case .vanish:
                    // Linux stops a listening socket on `shutdown`: connects are refused, and the descriptor stays
                    // the listener's until `stop()` closes it.
                    shutdown(listener, Int32(SHUT_RDWR))
                    close(connection)
                    return
                }
            }
            close(connection)
        }

        private static func find(_ marker: [UInt8], in bytes: [UInt8]) -> Int? {
            guard bytes.count >= marker.count else { return nil }
            return (0...(bytes.count - marker.count)).first { bytes[$0..<($0 + marker.count)].elementsEqual(marker) }
        }
    }

    static let written =
        #"{"collection":"c","version":"e.2","changes":{"from":"e.1","to":"e.2","#
        + #""sections":{"deleted":[],"inserted":[],"moved":[],"updated":[]},"#
        + #""items":{"deleted":[],"inserted":[],"moved":[],"updated":[]}}}"#

    /// The `noAnswer` a request ends with; nil, recorded as an issue, when it succeeds. Any other error is thrown.
    static func noAnswer(_ what: String, _ request: () async throws(WriteError) -> Void) async throws -> WriteError? {
        do throws(WriteError) {
            try await request()
            Issue.record("\(what) succeeded")
            return nil
        } catch {
            guard case .noAnswer = error else { throw error }
            return error
        }
    }

    /// An answer cut inside its headers is a write with no answer, its outcome unknown: the process goes on.
    @Test func anAnswerCutInsideItsHeadersIsNoAnswer() async throws {
        let peer = try ScriptedPeer { _ in .raw("HTTP/1.1 200 OK\r\nContent-Type: applic") }
        defer { peer.stop() }
        let client = ChangeServerClient(baseURL: peer.baseURL, timeout: .seconds(10))
        let cut = try await Self.noAnswer("a cut answer") { () async throws(WriteError) in
            _ = try await client.upsert("a", in: "c")
        }
        #expect(cut?.outcomeUnknown == true)
        #expect(peer.received.count == 1)
    }

    static let snapshot = #"{"collection":"c","version":"e.1","sections":[]}"#
    /// The snapshot with its length, and chunked in two with an extension and a trailer.
    static let sized = "Content-Length: \(snapshot.utf8.count)\r\n\r\n" + snapshot
    static let chunked =
        "5 ;x=1\r\n\(snapshot.prefix(5))\r\n\(String(snapshot.utf8.count - 5, radix: 16))\r\n"
        + "\(snapshot.dropFirst(5))\r\n0\r\nTrailer: t\r\n\r\n"

    /// A `200` whose header lines and body follow.
    static func ok(_ rest: String) -> String { "HTTP/1.1 200 OK\r\n" + rest }

    /// Answers as a server, a proxy or a broken one may send them, each read as HTTP/1.1 says or refused as no
    /// answer, never a trap: the whole process stopped on a negative `Content-Length` and on a chunk size past
    /// `Int`, and an interim `103` was taken for the answer.
    @Test(arguments: [
        ("chunked, with an extension", ok("Transfer-Encoding: chunked\r\n\r\n" + chunked), true),
        ("read until the connection closes", ok("\r\n" + snapshot), true),
        ("after a 103", "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + ok(sized), true),
        ("a negative Content-Length", ok("Content-Length: -5\r\n\r\n" + snapshot), false),
        ("a Content-Length with a sign", ok("Content-Length: +49\r\n\r\n" + snapshot), false),
        ("a chunk size past Int", ok("Transfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabc"), false),
        ("a chunk without its CRLF", ok("Transfer-Encoding: chunked\r\n\r\n2\r\nabXY0\r\n\r\n"), false),
        ("a body cut short", ok("Content-Length: 500\r\n\r\n" + snapshot), false),
        ("no HTTP at all", "SSH-2.0-OpenSSH\r\n\r\n", false),
    ])
    func answersAreReadOrRefusedNeverTrapped(what: String, answer: String, isRead: Bool) async throws {
        let peer = try ScriptedPeer { _ in .raw(answer) }
        defer { peer.stop() }
        let client = ChangeServerClient(baseURL: peer.baseURL, timeout: .seconds(10))
        do throws(WriteError) {
            let read = try await client.snapshot(of: "c")
            #expect(isRead && read.version.description == "e.1", "\(what)")
        } catch {
            #expect(!isRead, "\(what): \(error)")
            guard case .noAnswer = error else { throw error }
        }
    }

    /// A write whose connection dies before its answer is sent once, and reported as a write whose outcome is
    /// unknown: it was not sent again (a `DELETE` sent again got `404`, reported as refused, where the first had
    /// deleted the item), nor reported refused.
    @Test func aWriteWhoseConnectionDiesIsSentOnce() async throws {
        let peer = try ScriptedPeer { index in index == 0 ? .answer(Self.written) : .raw("") }
        defer { peer.stop() }
        let client = ChangeServerClient(baseURL: peer.baseURL, timeout: .seconds(10))
        #expect(try await client.upsert("a", in: "c").version.seq == 2)
        let deleted = try await Self.noAnswer("a write without an answer") { () async throws(WriteError) in
            try await client.deleteItem("a", from: "c")
        }
        #expect(deleted?.outcomeUnknown == true)
        try await Task.sleep(for: .milliseconds(300))
        #expect(peer.received.map { String($0.prefix(6)) } == ["PUT /v", "DELETE"], "\(peer.received)")
    }

    /// Through a `URLSession`, a failure to connect is no proof that nothing was sent: libcurl sends a request
    /// again on a new connection when its kept one dies unanswered, and a server that read the write (and may have
    /// applied it) before it went away then refuses the second connect. It is `noAnswer`, its outcome unknown: as
    /// `unreachable` an app would send the write again.
    @Test func aSessionsFailureToConnectAfterSendingIsNoAnswer() async throws {
        let peer = try ScriptedPeer { index in index == 0 ? .answer(Self.written) : .vanish }
        defer { peer.stop() }
        let client = ChangeServerClient(
            baseURL: peer.baseURL, timeout: .seconds(10), session: FeedClient.defaultSession)
        #expect(try await client.upsert("a", in: "c").version.seq == 2)
        let lost = try await Self.noAnswer("a write whose server went away") { () async throws(WriteError) in
            _ = try await client.apply([], to: "c")
        }
        #expect(lost?.outcomeUnknown == true)
        #expect(peer.received.map { String($0.prefix(4)) } == ["PUT ", "POST"], "\(peer.received)")
    }

    /// A connection accepted and never answered ends at the request's timeout, as no answer.
    @Test func anUnansweredRequestEndsAtItsTimeout() async throws {
        let peer = try ScriptedPeer { _ in .silence }
        defer { peer.stop() }
        let client = ChangeServerClient(baseURL: peer.baseURL, timeout: .seconds(2))
        let started = ContinuousClock.now
        let unanswered = try await Self.noAnswer("an unanswered read") { () async throws(WriteError) in
            _ = try await client.snapshot(of: "c")
        }
        #expect(unanswered != nil)
        let waited = ContinuousClock.now - started
        #expect(waited >= .seconds(2) && waited < .seconds(20), "\(waited)")
    }

    /// Cancelling the task of a request under way ends it at once.
    @Test func aCancelledRequestEndsAtOnce() async throws {
        let peer = try ScriptedPeer { _ in .silence }
        defer { peer.stop() }
        let client = ChangeServerClient(baseURL: peer.baseURL, timeout: .seconds(60))
        let started = ContinuousClock.now
        let task = Task { try await client.snapshot(of: "c") }
        while peer.received.isEmpty && ContinuousClock.now - started < .seconds(20) {
            try await Task.sleep(for: .milliseconds(10))
        }
        task.cancel()
        do {
            _ = try await task.value
            Issue.record("a cancelled read succeeded")
        } catch let error as WriteError {
            #expect(error == .cancelled(sent: true) && error.outcomeUnknown)
        }
        #expect(ContinuousClock.now - started < .seconds(20))
    }
}
