import Glibc

/// What the kernel knows of a TCP connection (`TCP_INFO`).
enum TCPInfo {
    /// Milliseconds since data last arrived on `socket` (a segment with only a `FIN` is none; since the handshake
    /// on a connection that received none), or nil when it is not a TCP socket (a Unix socket to a local
    /// database). Any thread may ask, while the socket is open.
    static func millisecondsSinceDataArrived(on socket: Int32) -> Int64? {
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(socket, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return nil }
        return Int64(info.tcpi_last_data_recv)
    }
}
