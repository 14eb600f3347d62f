/// A response a handler gives back: status, headers and body bytes (JSON unless a header says otherwise).
struct Response: Sendable {
    var status: HTTPStatus { didSet { share = nil } }
    var headers: [(name: String, value: String)] { didSet { share = nil } }
    var body: [UInt8] { didSet { share = nil } }
    /// A large body held apart (`ResponseBytes`), sent in place of `body` (then empty), and shared with the other
    /// answers made of the same bytes.
    var sharedBody: ResponseBytes? { didSet { share = nil } }
    /// Set on a response that answers many requests byte for byte (`ResponseShare`); a copy that is changed
    /// afterwards is its own response again.
    var share: ResponseShare?
    /// The `Content-Length` of a `304`: the length of the body its `200` would have had, the only value RFC 9110
    /// §8.6 allows there (libmicrohttpd would write `0`, which a cache could take for the stored body's length).
    /// Nil for every other response, whose `Content-Length` is its body's.
    private(set) var notModifiedLength: Int? { didSet { share = nil } }

    init(_ status: HTTPStatus, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    static let jsonContentType = "application/json; charset=utf-8"

    /// The response's headers with the exchange's own (`Exchange.extraHeaders`, CORS) added: a `Vary` in both
    /// becomes one line naming both, so that a cache that reads one `Vary` line sees every header the answer
    /// depends on (a feed answer's `Accept` and a CORS answer's `Origin`).
    mutating func addHeaders(_ extra: [(name: String, value: String)]) {
        guard !extra.isEmpty else { return }
        headers = Self.headers(headers, adding: extra)
    }

    static func headers(_ headers: [(name: String, value: String)], adding extra: [(name: String, value: String)])
        -> [(name: String, value: String)]
    {
        var merged = headers
        for header in extra {
            if header.name == "Vary", let index = merged.firstIndex(where: { $0.name == "Vary" }) {
                merged[index].value += ", " + header.value
            } else {
                merged.append(header)
            }
        }
        return merged
    }

    /// The answer to a conditional read whose `If-None-Match` names `ok`'s tag: `304` with the headers of `ok`
    /// that RFC 9110 §15.4.5 has it repeat (all but `Content-Type`: `ETag`, `Cache-Control`, `Vary` and the like),
    /// and the length of `ok`'s body as its `Content-Length`.
    static func notModified(answering ok: Response) -> Response {
        var response = Response(.notModified, headers: ok.headers.filter { $0.name != "Content-Type" })
        response.notModifiedLength = ok.contentLength
        return response
    }

    /// The `Content-Length` this response is sent with.
    var contentLength: Int { notModifiedLength ?? sharedBody?.count ?? body.count }

    /// A JSON response; `write` writes the body.
    static func json(
        _ status: HTTPStatus, headers: [(name: String, value: String)] = [], _ write: (inout JSONWriter) -> Void
    ) -> Response {
        var writer = JSONWriter()
        write(&writer)
        var allHeaders: [(name: String, value: String)] = []
        allHeaders.reserveCapacity(1 + headers.count)
        allHeaders.append(("Content-Type", jsonContentType))
        allHeaders.append(contentsOf: headers)
        return Response(status, headers: allHeaders, body: writer.bytes)
    }
}
