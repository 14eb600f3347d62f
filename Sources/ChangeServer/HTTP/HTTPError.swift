/// An error a handler throws to answer with a 4xx or 5xx: it carries its status, its stable snake_case code and a
/// message for people, and becomes the JSON error body of API.md in one place (`Response.error`).
struct HTTPError: Error, Sendable {
    var status: HTTPStatus
    var code: String
    var message: String
    /// The index of the rejected op, for errors in a list of ops.
    var opIndex: Int?
    /// The collection's current version, for `410` on the change feed.
    var current: String?
    var headers: [(name: String, value: String)] = []

    init(_ status: HTTPStatus, code: String, _ message: String, opIndex: Int? = nil, current: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.opIndex = opIndex
        self.current = current
    }

    func with(header name: String, _ value: String) -> HTTPError {
        var copy = self
        copy.headers.append((name, value))
        return copy
    }
}
