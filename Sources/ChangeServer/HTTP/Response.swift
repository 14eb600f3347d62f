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

    /// The error body of API.md: `{"error": {"code", "message"}}`, with `op` and `current` where they apply.
    static func error(_ error: HTTPError) -> Response {
        json(error.status, headers: error.headers) { writer in
            writer.object { writer in
                writer.field("error") {
                    $0.object { writer in
                        writer.field("code", error.code)
                        writer.field("message", error.message)
                        if let opIndex = error.opIndex { writer.field("op", opIndex) }
                    }
                }
                if let current = error.current { writer.field("current", current) }
            }
        }
    }
}
