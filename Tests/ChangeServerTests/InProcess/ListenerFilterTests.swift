import CHTTPD
import Glibc
import Testing

/// A stopping loop's listener drops the SYNs of new connections before it takes its backlog and closes
/// (`chttpd_drop_new_connections`, `HTTPServer.quiesce`): a connection the kernel completed into its queue after
/// the last accept was reset by the close, its request sent.
@Suite struct ListenerFilterTests {
    /// A client connecting to a listener that drops new connections stays unconnected (its SYN dropped: the kernel
    /// sends it again a second later), where one to a plain listener connects at once.
    @Test func aListenerThatDropsNewConnectionsCompletesNoneIntoItsQueue() throws {
        for drops in [false, true] {
            let (listener, port) = try listeningOnLoopback()
            defer { close(listener) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            if drops { #expect(chttpd_drop_new_connections(listener) == 0) }
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
            defer { close(client) }
            let started = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
            }
            try #require(started == 0 || errno == EINPROGRESS)
            var writable = pollfd(fd: client, events: Int16(POLLOUT), revents: 0)
            var failure: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            let connected =
                started == 0
                || (poll(&writable, 1, 300) == 1 && getsockopt(client, SOL_SOCKET, SO_ERROR, &failure, &size) == 0
                    && failure == 0)
            #expect(connected == !drops, drops ? "connected through the filter" : "not connected")
        }
    }
}
