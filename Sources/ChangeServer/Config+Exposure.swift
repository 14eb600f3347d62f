import Glibc

extension Config {
    /// The start's warning for a server anyone who reaches it may change: no token, listening on an address other
    /// than loopback (the default `0.0.0.0` is every interface, which a container needs, and which the quick
    /// start also opens on a developer's machine). Nil when a token is set or the address is loopback.
    var openAccessWarning: String? {
        guard writeToken == nil, readToken == nil, !Self.isLoopback(host) else { return nil }
        return "no --write-token: anyone who can reach this server on \(host) can change and delete every collection; "
            + "set --write-token or CHANGESERVER_WRITE_TOKEN (and --read-token to guard reads), or listen on "
            + "--host 127.0.0.1 "
            + "behind a front that checks access"
    }

    /// Whether `host` names the loopback interface alone: `localhost`, an IPv4 address in 127.0.0.0/8 or `::1`.
    /// Another name is taken as reaching further, whatever it resolves to.
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 { return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127 }
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, host, &ipv6) == 1 else { return false }
        return withUnsafeBytes(of: &ipv6) { bytes in bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1 }
    }
}
