/// A response a handler gives back: status, headers and body bytes (JSON unless a header says otherwise).
struct Response: Sendable {
    var status: HTTPStatus
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    init(_ status: HTTPStatus, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    static let jsonContentType = "application/json; charset=utf-8"

    /// A JSON response; `write` writes the body.
    static func json(
        _ status: HTTPStatus, headers: [(name: String, value: String)] = [], _ write: (inout JSONWriter) -> Void
    ) -> Response {
        var writer = JSONWriter()
        write(&writer)
        return Response(status, headers: [("Content-Type", jsonContentType)] + headers, body: writer.bytes)
    }
}
