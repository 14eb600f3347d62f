import CHTTPD
import Glibc

/// Answers queued through libmicrohttpd, and whether their headers fit in what is left of the connection's memory.
extension HTTPServer {
    /// The answer to a `GET` is counted against `--max-response-memory` (`ResponseBytes`), and replaced by the
    /// handler's `503` when it finds no room. The answer to a write never is: it may report a change made already,
    /// which a `503` must never do; nor is a `HEAD`'s, whose body is never sent, so its answer is let go as soon as
    /// its headers are out.
    func respond(_ exchange: Exchange, _ response: Response) -> MHD_Result {
        finish(exchange, counted(response, for: exchange))
    }

    /// The libmicrohttpd response for `response`, counted against `--max-response-memory` when it answers a `GET`
    /// (as `respond` explains), or the handler's `503` when there is no room for it: for answers given at once, and
    /// for reads answered later (a large snapshot encoded off the loop, `App.answerRead`).
    func counted(_ response: Response, for exchange: Exchange) -> SharedResponse {
        let made = shared(response, for: exchange, budget: exchange.method == "GET" ? options.responseBudget : nil)
        guard made.lackedMemory, let handler else { return made }
        return shared(handler.response(to: .responseMemoryFull(limit: options.responseBudget.limit)), for: exchange)
    }

    /// The libmicrohttpd response for `response` with the exchange's own headers: the shared one when the response
    /// is shared (`ResponseShare`) and those headers are the same for every request (none, or `*`'s CORS headers,
    /// added once); else one of its own. `budget`: as `SharedResponse.init`'s.
    func shared(_ response: Response, for exchange: Exchange, budget: MemoryBudget? = nil) -> SharedResponse {
        var response = closingIfQuiesced(response)
        if let share = response.share, exchange.extraHeadersAreTheSameForAll {
            return share.shared(response, adding: exchange.extraHeaders, budget: budget)
        }
        response.addHeaders(exchange.extraHeaders)
        return SharedResponse(response, budget: budget)
    }

    /// The response with `Connection: close` when this loop stops (made apart from a shared response): a
    /// keep-alive client whose write committed as the stop began got its answer without it, sent its next request
    /// on that connection, and the request went unanswered (and unlogged) once the loop was gone. So do the
    /// fallback answers of `finish`.
    func closingIfQuiesced(_ response: Response) -> Response {
        guard isQuiesced, !response.headers.contains(where: { $0.name == "Connection" }) else { return response }
        var response = response
        response.headers.append(("Connection", "close"))
        return response
    }

    /// Queues the response. When it cannot go as it is, the failure is logged and counted and another answer goes
    /// instead, so that a client never waits for an answer that will not come: `431` when the request's headers
    /// leave no room for the response's in the connection's memory (`answerHeadersTooLarge`); a bare `500` when MHD
    /// refused the response otherwise; if even that fails the connection is closed. In a stop both say
    /// `Connection: close`, as every answer then does.
    func finish(_ exchange: Exchange, _ response: SharedResponse) -> MHD_Result {
        // The body has served its purpose once the answer is decided: its budget is free for the next request.
        releaseBody(of: exchange)
        let fits = fits(response, on: exchange)
        if response.isComplete, fits, response.queue(on: exchange.connection) {
            exchange.isAnswered = true
            handler?.didRespond(exchange, status: response.status)
            return .YES
        }
        exchange.isAnswered = true
        let (fallback, result) = response.isComplete && !fits ? answerHeadersTooLarge(exchange) : answerBare(exchange)
        handler?.responseFailed(exchange, status: response.status, fits: fits, fallback: fallback)
        if let fallback { handler?.didRespond(exchange, status: fallback) }
        return result
    }

    /// Answers `431` (the handler's answer to `.headersTooLarge`, without the exchange's extra headers): through MHD
    /// when it fits; else, with `Connection: close`, written on the socket outside MHD, whose side of the
    /// connection then closes (`.NO`). Without that, headers just short of filling the connection's memory (which
    /// MHD answers `431` itself) would leave no room even for a bare answer, and the client would get none.
    func answerHeadersTooLarge(_ exchange: Exchange) -> (status: HTTPStatus?, result: MHD_Result) {
        guard let handler else { return (nil, .NO) }
        let refusal = closingIfQuiesced(handler.response(to: .headersTooLarge(limit: options.connectionMemory)))
        let throughLibrary = SharedResponse(refusal)
        if throughLibrary.isComplete, fits(throughLibrary, on: exchange),
            throughLibrary.queue(on: exchange.connection)
        {
            return (refusal.status, .YES)
        }
        let sent = sendClosing(refusal, on: exchange.connection, includingBody: exchange.method != "HEAD")
        return (sent ? refusal.status : nil, .NO)
    }

    /// Writes `response` with `Connection: close` on the connection's socket, outside MHD, in one `send` that does
    /// not wait: for an answer MHD cannot give (its side of the connection is closed after it); false when the
    /// socket did not take it whole.
    func sendClosing(_ response: Response, on connection: OpaquePointer, includingBody: Bool) -> Bool {
        var response = response
        if !response.headers.contains(where: { $0.name == "Connection" }) {
            response.headers.append(("Connection", "close"))
        }
        let wire = SharedResponse.wire(of: response, includingBody: includingBody)
        let socket = chttpd_connection_fd(connection)
        guard socket >= 0 else { return false }
        let sent = wire.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        return sent == wire.count
    }

    /// Queues a bare `500` (no body, and no header of ours but `Connection: close` in a stop when it fits): the
    /// answer of last resort; `.NO` (the connection closes) when even that is refused.
    private func answerBare(_ exchange: Exchange) -> (status: HTTPStatus?, result: MHD_Result) {
        let closing = closingIfQuiesced(Response(.internalServerError))
        let fitsClosing = fits(
            headerBytes: SharedResponse.headerBytes(of: closing.headers), status: .internalServerError, on: exchange)
        let fallback = SharedResponse(fitsClosing ? closing : Response(.internalServerError))
        let queued = fallback.isComplete && fallback.queue(on: exchange.connection)
        return queued ? (fallback.status, .YES) : (nil, .NO)
    }

    /// Whether the response's headers fit in what is left of the connection's memory pool next to the request:
    /// MHD accepts a response whose headers do not fit, then closes the connection without a word. The pool holds
    /// the request line and headers as received, a record of `poolBytesPerValue` for each header and query
    /// argument, then the response's header lines and what MHD adds to them; measured on libmicrohttpd 0.9.75.
    func fits(_ response: SharedResponse, on exchange: Exchange) -> Bool {
        fits(headerBytes: response.headerBytes, status: response.status, on: exchange)
    }

    /// `fits` for a response of `status` whose header lines take `headerBytes`.
    func fits(headerBytes: Int, status: HTTPStatus, on exchange: Exchange) -> Bool {
        requestPoolBytes(of: exchange) + headerBytes + Self.poolBytesAdded(status) <= options.connectionMemory
    }

    /// `fits` for a request without an exchange, from the request's header bytes as MHD counted them.
    func fits(_ response: SharedResponse, on connection: OpaquePointer) -> Bool {
        let headerBytes = Int(chttpd_request_header_size(connection))
        let values =
            Int(MHD_get_connection_values(connection, .HEADER_KIND, nil, nil))
            + Int(MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, nil, nil))
        return headerBytes > 0
            && headerBytes + values * Self.poolBytesPerValue + response.headerBytes
                + Self.poolBytesAdded(response.status) <= options.connectionMemory
    }

    /// The pool bytes the request takes (worked out once per exchange: a fan-out asks for each of its answers).
    func requestPoolBytes(of exchange: Exchange) -> Int {
        if let bytes = exchange.requestPoolBytes { return bytes }
        let (method, path, headers, query) =
            (exchange.request.method, exchange.request.path, exchange.request.headers, exchange.request.query)
        var bytes = method.utf8.count + path.utf8.count + " HTTP/1.1\r\n\r\n".utf8.count
        for header in headers { bytes += header.name.utf8.count + header.value.utf8.count + 4 }
        for argument in query { bytes += argument.name.utf8.count + argument.value.utf8.count + 2 }
        bytes += (headers.count + query.count) * Self.poolBytesPerValue
        exchange.requestPoolBytes = bytes
        return bytes
    }

    func releaseBody(of exchange: Exchange) {
        options.bodyBudget.release(exchange.reservedBodyBytes)
        exchange.reservedBodyBytes = 0
        exchange.request.body = []
    }

    /// Pool bytes MHD spends on each request header or query argument besides its text.
    static let poolBytesPerValue = 64
    /// Pool bytes a request with a body leaves at least, for libmicrohttpd to read the body into: with one it read
    /// (a byte at a time), with none it hung; the margin covers the pool's alignment, which the estimate leaves out.
    static let bodyReadRoom = 64
    /// Pool bytes MHD adds to a response's headers: the status line (with the status's reason phrase, up to 31
    /// bytes for `431`), `Date`, `Content-Length` and the blank line, with a margin for its alignment and for the
    /// `Connection` header it adds on a connection that closes (HTTP/1.0, `Connection: close`).
    static func poolBytesAdded(_ status: HTTPStatus) -> Int {
        126 + (MHD_get_reason_phrase_for(UInt32(status.rawValue)).map { strlen($0) } ?? 0)
    }
}
