import Foundation
import Synchronization

/// A loopback listener that reads each request's head and closes the connection without answering, or after
/// `answer`, as a stopping server answers every request (`503 shutting_down`, `Connection: close`).
final class ClosingListener: @unchecked Sendable {
    let port: Int
    private let descriptor: Int32
    private let thread: Thread
    private let connections = Connections()

    /// Connections accepted so far.
    var accepted: Int { connections.count.load(ordering: .relaxed) }

    private final class Connections: Sendable {
        let count = Atomic<Int>(0)
    }

    init(answering answer: [UInt8]? = nil) throws {
        let (listener, port) = try listeningOnLoopback()
        descriptor = listener
        self.port = port
        let connections = connections
        thread = Thread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                connections.count.add(1, ordering: .relaxed)
                var head: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                var timeout = timeval(tv_sec: 2, tv_usec: 0)
                setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
                    let read = recv(connection, &buffer, buffer.count, 0)
                    guard read > 0 else { break }
                    head += buffer[..<read]
                }
                if let answer { _ = send(connection, answer, answer.count, Int32(MSG_NOSIGNAL)) }
                close(connection)
            }
        }
        thread.start()
    }

    /// Stops accepting (the thread's `accept` fails once the socket is shut down).
    func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }

    /// A port nothing listens on now: bound to port 0 and closed.
    static func freePort() throws -> Int {
        let listener = try ClosingListener()
        listener.stop()
        return listener.port
    }
}

/// A TCP socket listening on a free loopback port (bound to port 0), and that port.
func listeningOnLoopback() throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
        }
    }
    guard bound, listen(descriptor, 16) == 0 else {
        close(descriptor)
        throw ClientError.malformed("cannot listen on loopback")
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}
