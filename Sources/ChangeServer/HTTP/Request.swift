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
        self.headers = headers.map { (Self.lowercased($0.name), $0.value) }
        self.body = body
    }

    /// The first header of that name (case-insensitive).
    func header(_ name: String) -> String? {
        let wanted = Self.lowercased(name)
        return headers.first { $0.name == wanted }?.value
    }

    /// Every header of that name (case-insensitive), in order.
    func headers(named name: String) -> [String] {
        let wanted = Self.lowercased(name)
        return headers.filter { $0.name == wanted }.map(\.value)
    }

    /// A raw (still percent-encoded) query argument.
    func rawQuery(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    private static func lowercased(_ name: String) -> String {
        name.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } ? name.lowercased() : name
    }
}
