import CHTTPD
import Glibc

/// What the server does with a complete request.
enum HandlerResult {
    /// Answer now.
    case respond(Response)
    /// Keep the request open: the handler has taken the exchange and answers it later with `HTTPServer.answer`.
    case hold
    /// Answer with an event stream (`EventStream`) and these headers; the handler keeps feeding the stream.
    case stream(EventStream, headers: [(name: String, value: String)])
}

/// Why the server answers a request itself, without handing it to the handler.
enum Refusal {
    /// The body is (or is announced to be) larger than `--max-body-bytes`.
    case bodyTooLarge(limit: Int)
    /// The server stopped before the held request could be completed.
    case stopped
    /// The request announces its body length twice, differently: the body's end cannot be known.
    case conflictingContentLength
    /// The request has both `Content-Length` and `Transfer-Encoding`.
    case lengthAndTransferCoding
    /// An HTTP/1.1 request without `Host`, or any request with several (RFC 9112 §3.2).
    case hostMissingOrRepeated(lines: Int)
    /// A `Host` that is not a host name or address with an optional port (RFC 9112 §3.2).
    case invalidHost(String)
    /// A request target holding a space, a control character, DEL, a NUL or a `#` (`Request.hasMalformedTarget`,
    /// `HTTPServer.targetHoldsNUL`).
    case malformedTarget
    /// A header line folded onto the next (obs-fold, RFC 9112 §5.2), or whose name has a space or another
    /// character no name has (§5.1), which libmicrohttpd misreads.
    case malformedHeader
    /// The bodies in flight on all connections already fill `--max-body-memory`.
    case bodyMemoryFull
    /// A large answer finds no room in `--max-response-memory`, which answers still being sent fill.
    case responseMemoryFull(limit: Int)
    /// The request's headers leave no room for the answer's in the connection's memory (`--connection-memory`).
    case headersTooLarge(limit: Int)
    /// The request's body comes in a transfer coding other than chunked: where it ends is unknown.
    case unsupportedTransferEncoding(String)
    /// No byte of the body came for `--body-timeout` seconds.
    case bodyTimedOut(seconds: Int)
    /// The request's headers were not all in `--header-timeout` seconds after its first bytes.
    case headersTimedOut(seconds: Int)
}

/// The application behind the HTTP server. Every call comes on the server's loop thread.
protocol HTTPHandler: AnyObject {
    /// Called when a request's headers have arrived: sets the headers every response to it carries (CORS, in
    /// `extraHeaders`), and returns the answer to a request that can be refused from its headers alone (route,
    /// method, authorization, media type), before any of its body is read; nil to read the body and `handle` it.
    func screen(_ exchange: Exchange) -> Response?
    /// The client of a held exchange hung up: true when the handler let go of it (a held poll), whose connection
    /// is then closed without an answer (logged `499`, as nginx logs a client that gave up).
    func clientLeft(_ exchange: Exchange) -> Bool
    /// A response could not be sent as it was: logged and counted by the handler. `fits`: false when its headers
    /// did not fit the connection's memory next to the request's, true when libmicrohttpd refused it otherwise;
    /// `fallback`: what was answered instead (nil: the connection was closed without an answer).
    func responseFailed(_ exchange: Exchange, status: HTTPStatus, fits: Bool, fallback: HTTPStatus?)
    /// A stop gave up waiting for `count` held mutations whose records are in the journal: their connections are
    /// closed unanswered (logged by the handler).
    func stoppedWaiting(forSubmitted count: Int)
    /// Handles a complete request; `.hold` leaves the exchange to be answered later with `HTTPServer.answer`.
    func handle(_ exchange: Exchange) -> HandlerResult
    /// The response to a request the server refuses itself.
    func response(to refusal: Refusal) -> Response
    /// A response was queued: one log line and the request metrics.
    func didRespond(_ exchange: Exchange, status: HTTPStatus)
    /// The loop holds its share of `--max-connections` (`limit`) open: libmicrohttpd accepts no more until one
    /// closes, and new clients wait in the listen backlog (a client then only sees a connection that hangs).
    func connectionLimitReached(limit: Int)
    /// A connection was answered `408` and closed because its request's headers did not all arrive in
    /// `--header-timeout` (`milliseconds` after it was seen begun): its log line and the request metrics.
    func headersTimedOut(milliseconds: Int)
    /// The answer to a body-less `GET` or `HEAD` of `path` (raw, without its query) that needs no `Exchange`: a
    /// response shared byte for byte by the requests like it (a snapshot at an unchanged version), with the route
    /// template it matched; nil to take the request the usual way. `header` looks up a request header by name.
    func quickAnswer(path: UnsafeBufferPointer<UInt8>, header: (String) -> String?)
        -> (route: String, response: SharedResponse)?
    /// A quick answer was queued: its log line and the request metrics, as `didRespond`.
    func didAnswerQuickly(method: String, path: UnsafeBufferPointer<UInt8>, route: String, status: HTTPStatus)
    /// The earliest deadline (monotonic milliseconds) the handler wants to be woken for, if any.
    var nextDeadline: Int64? { get }
    /// The loop woke up: expire what is due.
    func tick(now: Int64)
    /// One turn of the loop is done: flush what was batched (log lines).
    func loopDidRun()
}
