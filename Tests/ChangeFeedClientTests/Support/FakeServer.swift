import Foundation
import ProcessSupport
import Testing

/// A tiny HTTP responder on 127.0.0.1 for answers a real server never gives: each request gets the answer
/// `respond` makes from its index and target, then the connection closes. Runs on one thread until `stop()`.
final class FakeServer: @unchecked Sendable {
    // @unchecked: `requests` and `stopped` are guarded by `lock`; the rest is set once in init.
    struct Answer {
        var status: Int
        var headers: [String: String] = [:]
        var body: String
    }

    let port: Int
    private let listener: Int32
    private let respond: @Sendable (Int, String) -> Answer
    private let lock = NSLock()
    private var requests: [(target: String, at: ContinuousClock.Instant)] = []
    private var stopped = false
    private let finished = DispatchSemaphore(value: 0)

    init(respond: @escaping @Sendable (_ index: Int, _ target: String) -> Answer) throws {
        self.respond = respond
        (listener, port) = try loopbackListener()
        Thread.detachNewThread { [self] in serve() }
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The targets requested so far, with when they arrived.
    var received: [(target: String, at: ContinuousClock.Instant)] { lock.withLock { requests } }

    func stop() {
        lock.withLock { stopped = true }
        // Its loop looks at `stopped` every 50 ms, and a connection's read gives up after 10 s.
        if finished.wait(timeout: .now() + 30) == .timedOut { Issue.record("the fake server did not stop") }
        close(listener)
    }

    private func serve() {
        while !lock.withLock({ stopped }) {
            var request = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&request, 1, 50) > 0 else { continue }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !text.contains("\r\n\r\n") {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                text += String(decoding: buffer[..<count], as: UTF8.self)
            }
            let target = text.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            let index = lock.withLock {
                requests.append((target, .now))
                return requests.count - 1
            }
            let answer = respond(index, target)
            var head = "HTTP/1.1 \(answer.status) X\r\nContent-Type: application/json\r\nConnection: close\r\n"
            head += "Content-Length: \(answer.body.utf8.count)\r\n"
            for (name, value) in answer.headers { head += "\(name): \(value)\r\n" }
            let bytes = Array((head + "\r\n" + answer.body).utf8)
            _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
        }
        finished.signal()
    }
}

/// A listening socket on 127.0.0.1, on a port the system picks, and that port.
func loopbackListener() throws -> (socket: Int32, port: Int) {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
    }
    guard bound == 0, listen(listener, 16) == 0 else {
        close(listener)
        throw TestFailure("bind/listen on 127.0.0.1 failed")
    }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
    }
    return (listener, Int(UInt16(bigEndian: address.sin_port)))
}
