import Glibc

/// Opens the listening socket the daemon serves, so that `--port 0` can pick a free port and the log can say
/// which one it got.
enum Listener {
    struct Bound {
        var descriptor: Int32
        var port: Int
    }

    /// Binds `host:port` (an IPv4 or IPv6 literal, or a name), with a backlog fit for many held polls.
    ///
    /// Every event loop binds the port with `SO_REUSEPORT`, which would also let a second server started on the
    /// same port by the same user share it silently and take half of the connections. So the first loop's bind
    /// (`joining` false) first checks that nobody listens there yet.
    static func open(host: String, port: Int, joining: Bool) throws(StartupError) -> Bound {
        let bound = try bind(host: host, port: port, joining: joining)
        guard listen(bound.descriptor, 4096) == 0 else {
            let reason = String(cString: strerror(errno))
            close(bound.descriptor)
            throw StartupError("cannot listen on \(address(host: host, port: bound.port)): \(reason)")
        }
        return bound
    }

    /// Checks that `open` could take `host:port` now, and lets it go: the start checks before it replays the
    /// journal or waits for its database, so that a `--host` that does not resolve, an address not of this machine
    /// or a port in use is reported at once, not after minutes. Nothing listens meanwhile, so connections are
    /// refused rather than left unanswered; `open` checks again once the server can serve.
    static func check(host: String, port: Int) throws(StartupError) {
        close(try bind(host: host, port: port, joining: false).descriptor)
    }

    private static func bind(host: String, port: Int, joining: Bool) throws(StartupError) -> Bound {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw StartupError("cannot resolve --host \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            let descriptor = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else {
                lastError = String(cString: strerror(errno))
                continue
            }
            if !joining, port != 0, let problem = inUse(info.pointee) {
                close(descriptor)
                throw StartupError("cannot listen on \(address(host: host, port: port)): \(problem)")
            }
            var one: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            // Each event loop listens on a socket of its own on the same port; the kernel spreads connections.
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
            guard Glibc.bind(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
                lastError = String(cString: strerror(errno))
                close(descriptor)
                continue
            }
            return Bound(descriptor: descriptor, port: boundPort(descriptor) ?? port)
        }
        throw StartupError("cannot listen on \(address(host: host, port: port)): \(lastError)")
    }

    /// `host:port` as in a URL, an IPv6 address in brackets (`[::1]:8080`).
    static func address(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Why the address cannot be bound by a socket that does not share its port (it is in use), or nil.
    private static func inUse(_ info: addrinfo) -> String? {
        let probe = socket(info.ai_family, info.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return nil }
        defer { close(probe) }
        var one: Int32 = 1
        setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(probe, info.ai_addr, info.ai_addrlen) != 0, errno == EADDRINUSE else { return nil }
        return "another process uses that port"
    }

    private static func boundPort(_ descriptor: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard status == 0 else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
        default:
            return nil
        }
    }
}
