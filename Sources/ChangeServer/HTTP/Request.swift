/// A request as the routes see it: plain values, built once where libmicrohttpd hands the request over, so that
/// routes can be called and tested without a connection.
struct Request: Sendable {
    var method: String
    /// The path as it came, still percent-encoded (the router decodes each segment).
    var path: String
    /// Query arguments as they came, still percent-encoded; the first of a repeated name wins.
    var query: [(name: String, value: String)]
    /// Header names are kept lowercased.
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    init(
        method: String, path: String, query: [(name: String, value: String)] = [],
        headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        let isLowercased = !headers.contains { Self.hasUppercase($0.name) }
        self.headers = isLowercased ? headers : headers.map { ($0.name.lowercased(), $0.value) }
        self.body = body
    }

    /// The path of a request target in absolute form (`http://host:port/v1/...`, which HTTP/1.1 servers must accept:
    /// clients that talk to a proxy send it): what follows the authority, `/` when nothing does. Any other target
    /// is returned as it came.
    static func originPath(_ target: String) -> String {
        // The usual target, a path, costs one byte's look on every request.
        guard target.utf8.first != UInt8(ascii: "/") else { return target }
        let scheme = target.utf8.prefix(8).map { $0 | 0x20 }
        let length =
            scheme.starts(with: "http://".utf8) ? 7 : scheme.starts(with: "https://".utf8) ? 8 : 0
        guard length > 0 else { return target }
        let rest = target.utf8.dropFirst(length)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return "/" }
        return String(target[slash...])
    }

    /// The first header of that name (case-insensitive): for a header that comes once (`Content-Type`, `Origin`).
    func header(_ name: String) -> String? {
        headers.first { Self.equalsLowercased($0.name, name) }?.value
    }

    /// A list header (`If-Match`, `If-None-Match`, `Accept`): its lines joined with ", ", since a client or a proxy
    /// may split one list over several lines and they mean what the joined line means (RFC 9110 §5.3). Reading
    /// the first line alone let a write through that a later line's `If-None-Match` refused.
    func listHeader(_ name: String) -> String? {
        var joined: String?
        for header in headers where Self.equalsLowercased(header.name, name) {
            joined = joined.map { $0 + ", " + header.value } ?? header.value
        }
        return joined
    }

    /// The lines of a header of that name (case-insensitive).
    func headerLines(_ name: String) -> Int {
        headers.reduce(0) { $0 + (Self.equalsLowercased($1.name, name) ? 1 : 0) }
    }

    /// A query argument as it came (still percent-encoded), the first of a repeated name. A name is matched once
    /// decoded (`%73ince` is `since`), as its value is read decoded.
    func rawQuery(_ name: String) -> String? {
        query.first { argument in
            argument.name == name
                || (argument.name.utf8.contains(UInt8(ascii: "%")) && percentDecoded(Substring(argument.name)) == name)
        }?.value
    }

    private static func hasUppercase(_ name: String) -> Bool {
        name.utf8.contains { $0 >= 0x41 && $0 <= 0x5A }
    }

    /// Whether a stored (lowercased) header name is `name` in any case; header names are ASCII (RFC 9110 §5.1).
    /// Names of another length (most of them) are told apart without comparing bytes, and the rest byte by byte
    /// in their buffers: every request looks up several headers, and comparing through the views' iterators cost
    /// a write about 2,000 instructions.
    private static func equalsLowercased(_ stored: String, _ name: String) -> Bool {
        guard stored.utf8.count == name.utf8.count else { return false }
        var stored = stored
        var name = name
        return stored.withUTF8 { stored in
            name.withUTF8 { name in
                for index in 0..<name.count {
                    let byte = name[index]
                    if stored[index] != (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) { return false }
                }
                return true
            }
        }
    }
}
