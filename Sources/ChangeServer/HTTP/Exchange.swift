import CHTTPD
import Glibc
import Synchronization

/// One HTTP request, from libmicrohttpd's first call for it to its completion. It lives on the server's loop
/// thread only: MHD calls the access handler there, and the feed answers held exchanges there. (`commit` alone is
/// shared with the thread that submits the request's record.)
final class Exchange {
    let connection: OpaquePointer
    /// The request, its body filled in as it arrives.
    var request: Request
    let started = MonotonicClock.now()
    /// Bytes of a body larger than `--max-body-bytes` that were received and dropped.
    var droppedBodyBytes = 0
    /// The answer decided from the headers alone (unauthorized, wrong media type, no room for the body): the body
    /// is read and discarded, never buffered, and this is the answer.
    var refusal: Response?
    /// Bytes of the body read and discarded because of `refusal`.
    var discardedBodyBytes = 0
    /// Bytes of the body budget (`MemoryBudget`) this request holds, given back when it completes.
    var reservedBodyBytes = 0
    /// Whether the request's body is still to come (announced by its headers, not yet whole): such an upload is
    /// watched once it outlasts its loop turn (`HTTPServer.watchUploads`).
    var awaitsBody = false
    /// When a piece of the body last arrived (monotonic milliseconds); the request's start before the first.
    var bodyProgress: Int64 = 0
    /// The client hung up before its body was whole.
    var leftMidBody = false
    /// Whether a hold of this exchange is watched for the client hanging up: set for held polls, which may wait
    /// minutes; a held mutation is answered as soon as it commits, so watching it would only cost system calls.
    var watchesHangUp = false
    /// The connection's socket while the held request is watched for the client hanging up.
    var watchedDescriptor: Int32?
    /// The route template, for metrics (set once routed).
    var route = "unmatched"
    /// The route the handler's screening of the headers let through, so that it is not matched twice.
    var screenedRoute: Route?
    /// The response for a suspended exchange, queued when MHD calls the handler again after the resume.
    var pendingResponse: SharedResponse?
    /// What answers a suspended exchange in place of the handler, made when MHD calls the handler again after the
    /// resume: an event stream whose first event was made off the loop (`HTTPServer.resume(_:answeringWith:)`).
    var pendingResult: (() -> HandlerResult)?
    /// Set once an answer is queued through MHD (`HTTPServer.finish`).
    var isAnswered = false
    /// Whether the target holds a NUL (`HTTPServer.targetHoldsNUL`): the request is refused.
    var targetHoldsNUL = false
    var isSuspended = false
    /// Whether the held request may be answered outside libmicrohttpd (`HTTPServer.answerDirectly`): decided when
    /// it is held.
    var answersDirectly = false
    /// Set once the exchange was answered outside MHD: when MHD calls the handler again (after the resume that
    /// lets it go), the handler closes MHD's side of it.
    var leavesLibrary = false
    /// Set when a held exchange is let go without an answer (its client hung up: `499`; a stop gave up waiting for
    /// it: `444`): when MHD calls the handler again (after the resume), the handler logs this status and closes the
    /// connection, sending nothing; when MHD ends the request first, its completion logs it. Cleared once logged.
    var closesUnanswered: HTTPStatus?
    /// The connection's socket, noted when the exchange may be answered outside MHD.
    var socket: Int32 = -1
    /// Bytes the request takes in MHD's connection pool (`HTTPServer.fits`), once worked out.
    var requestPoolBytes: Int?
    /// Headers added to every response of this exchange (CORS), fixed when the request arrives.
    var extraHeaders: [(name: String, value: String)] = []
    /// Whether `extraHeaders` are the same for every request of this server (none, or `--cors-origin '*'`'s), so
    /// that a shared response may be kept with them added (`ResponseShare.shared(_:adding:)`).
    var extraHeadersAreTheSameForAll = true
    /// Bytes of the header lines of the longest answer the request gets once its write is committed (besides
    /// `extraHeaders`), 0 for a request that writes nothing: `HTTPServer` refuses it `431` before it is
    /// submitted when these would not fit next to its headers, since a committed write's answer cannot be replaced.
    var committedAnswerHeaderBytes = 0
    /// Whether the request's record went to the journal (`CommitClaim`), decided once between the thread that
    /// submits it and a stopping loop that gives up on it.
    let commit = CommitClaim()

    /// Whether the request came as HTTP/1.1 (libmicrohttpd then sends a body of unknown length chunked).
    let isHTTP11: Bool
    /// Header lines libmicrohttpd misread (`chttpd_header_is_misread`: folded onto the next line, or a name with
    /// a space): such a request is refused.
    let misreadHeaderLines: Int

    var method: String { request.method }
    var path: String { request.path }

    /// Reads the request line's parts, headers and query arguments from MHD (in its first call for the request);
    /// `headerEnd`: where its header lines end in MHD's memory (`chttpd_header_end`).
    init(
        connection: OpaquePointer, method: String, path: String, isHTTP11: Bool, headerEnd: UnsafePointer<CChar>?
    ) {
        self.connection = connection
        self.isHTTP11 = isHTTP11
        let headers = Self.values(connection, .HEADER_KIND, headerEnd: headerEnd)
        misreadHeaderLines = headers.misread
        request = Request(
            method: method, path: Request.originPath(path), query: Self.values(connection, .GET_ARGUMENT_KIND).pairs,
            headers: headers.pairs)
    }

    /// An exchange for a request read already, on a connection that is never touched: what tests of the feed
    /// hold, where libmicrohttpd has no connection to give.
    init(unconnected request: Request) {
        connection = OpaquePointer(bitPattern: 1)!
        isHTTP11 = true
        misreadHeaderLines = 0
        self.request = request
    }

    /// Whether a query argument of the request makes its target malformed (`Request.isMalformedInTarget`), read in
    /// place: for the quick way to a snapshot, which builds no `Request`.
    static func hasMalformedQuery(_ connection: OpaquePointer) -> Bool {
        guard MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, nil, nil) > 0 else { return false }
        var malformed = false
        withUnsafeMutablePointer(to: &malformed) { malformed in
            _ = MHD_get_connection_values(
                connection, .GET_ARGUMENT_KIND,
                { context, _, key, value in
                    func isMalformed(_ text: UnsafePointer<CChar>?) -> Bool {
                        guard var byte = text else { return false }
                        while byte.pointee != 0 {
                            if Request.isMalformedInTarget(UInt8(bitPattern: byte.pointee), inQuery: true) {
                                return true
                            }
                            byte += 1
                        }
                        return false
                    }
                    guard isMalformed(key) || isMalformed(value) else { return .YES }
                    context?.assumingMemoryBound(to: Bool.self).pointee = true
                    return .NO
                }, malformed)
        }
        return malformed
    }

    /// The values of one kind, in order, and how many of them libmicrohttpd misread (`chttpd_header_is_misread`:
    /// headers only); header names lowercased here (ASCII, RFC 9110 §5.1), as `Request` keeps them, so that it
    /// need not copy them again.
    private static func values(
        _ connection: OpaquePointer, _ kind: MHD_ValueKind, headerEnd: UnsafePointer<CChar>? = nil
    ) -> (pairs: [(name: String, value: String)], misread: Int) {
        struct Collector {
            var pairs: [(name: String, value: String)] = []
            var misread = 0
            let isHeaders: Bool
            let headerEnd: UnsafePointer<CChar>?
            /// Where the header line after the last one seen starts (`chttpd_header_line_is_misread`).
            var next: UnsafePointer<CChar>?
        }
        let count = MHD_get_connection_values(connection, kind, nil, nil)
        guard count > 0 else { return ([], 0) }
        var collector = Collector(isHeaders: kind == .HEADER_KIND, headerEnd: headerEnd)
        collector.pairs.reserveCapacity(Int(count))
        withUnsafeMutablePointer(to: &collector) { collector in
            _ = MHD_get_connection_values(
                connection, kind,
                { context, _, key, value in
                    guard let context, let key else { return .YES }
                    let collector = context.assumingMemoryBound(to: Collector.self)
                    let isHeaders = collector.pointee.isHeaders
                    if isHeaders,
                        chttpd_header_line_is_misread(
                            key, value, collector.pointee.headerEnd, &collector.pointee.next) != 0
                    {
                        collector.pointee.misread += 1
                    }
                    let name = isHeaders ? lowercasedASCII(key) : String(cString: key)
                    collector.pointee.pairs.append((name, value.map { String(cString: $0) } ?? ""))
                    return .YES
                }, collector)
        }
        if collector.isHeaders, chttpd_last_header_line_is_misread(collector.next, headerEnd) != 0 {
            collector.misread += 1
        }
        return (collector.pairs, collector.misread)
    }
}

/// A C string with its ASCII capitals lowercased.
private func lowercasedASCII(_ text: UnsafePointer<CChar>) -> String {
    let length = strlen(text)
    return text.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
        String(unsafeUninitializedCapacity: length) { buffer in
            for index in 0..<length {
                let byte = bytes[index]
                buffer[index] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            }
            return length
        }
    }
}
