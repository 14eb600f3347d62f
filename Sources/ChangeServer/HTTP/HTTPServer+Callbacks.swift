import CHTTPD
import Glibc

/// libmicrohttpd's calls into the server: a request's headers, then its body in pieces, then its end; a connection
/// started or closed.
extension HTTPServer {
    private func access(
        _ connection: OpaquePointer, _ url: UnsafePointer<CChar>, _ method: UnsafePointer<CChar>,
        _ version: UnsafePointer<CChar>?, _ uploadSize: UnsafeMutablePointer<Int>,
        _ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>, _ upload: UnsafePointer<CChar>?
    ) -> MHD_Result {
        guard let handler else { return .NO }
        guard let opaque = context.pointee else {
            inFlight += 1
            if stopDeadline != nil { lastArrival = MonotonicClock.now() }
            record(of: connection)?.requests &+= 1
            if mayAnswerQuickly(connection, method, url), !targetHoldsNUL(connection, version) {
                context.pointee = UnsafeMutableRawPointer(bitPattern: Self.quickAnswerMark)
                return .YES
            }
            return headersArrived(start(connection, method, url, version, context), handler)
        }
        // A call that hands over body bytes, none of them the request's: libmicrohttpd makes one while it reads a
        // body and finds only bytes past it, as after the `100 Continue` it sends to a request with `Expect` and no
        // body followed in the same packet by a CRLF or a pipelined request. A response queued in it is refused,
        // and the request went unanswered. The call for the whole request follows, with no bytes (`upload` nil).
        if uploadSize.pointee == 0, upload != nil { return .YES }
        let exchange: Exchange
        if UInt(bitPattern: opaque) == Self.quickAnswerMark {
            if answerQuickly(connection, method, url, handler) { return .YES }
            // No quick answer: the request goes the usual way from here, its headers screened now. With no body
            // and no `Expect`, screening keeps a refusal to answer below; what it would answer at once (a malformed
            // target or header, a bad `Host`) `mayAnswerQuickly` sent the usual way from the start, and should one
            // be answered here all the same, the call ends with it.
            exchange = start(connection, method, url, version, context)
            let screened = headersArrived(exchange, handler)
            // Answered from its headers (refused at once): nothing more to do.
            guard screened == .YES, !exchange.isAnswered else { return screened }
        } else {
            exchange = Unmanaged<Exchange>.fromOpaque(opaque).takeUnretainedValue()
        }
        // Answered outside MHD: MHD's side of the connection is closed (its socket is a placeholder by now, or the
        // client is gone).
        if exchange.leavesLibrary { return .NO }
        if let status = exchange.closesUnanswered {
            exchange.closesUnanswered = nil
            releaseBody(of: exchange)
            handler.didRespond(exchange, status: status)
            return .NO
        }
        if let pending = exchange.pendingResponse {
            exchange.pendingResponse = nil
            // Made before the stop began, queued after it (a write's answer posted just before the quiesce, when
            // the loop was busy): it closes its connection too, as one made after (`shared(_:for:budget:)`).
            return finish(exchange, isQuiesced && !pending.closesConnection ? pending.closing() : pending)
        }
        if let pending = exchange.pendingResult {
            exchange.pendingResult = nil
            return answer(exchange, with: pending(), connection, version, handler)
        }
        if uploadSize.pointee > 0 {
            let size = uploadSize.pointee
            uploadSize.pointee = 0
            return received(size, upload, for: exchange, handler)
        }
        if exchange.awaitsBody { endUpload(exchange) }
        if exchange.droppedBodyBytes > 0 { return respond(exchange, tooLarge(handler)) }
        if let refusal = exchange.refusal { return respond(exchange, refusal) }
        if !leavesRoomForCommittedAnswerAfterTrailers(exchange) {
            return respond(exchange, handler.response(to: .headersTooLarge(limit: options.connectionMemory)))
        }
        return answer(exchange, with: handler.handle(exchange), connection, version, handler)
    }

    /// Answers, holds or streams as the handler's `result` says.
    private func answer(
        _ exchange: Exchange, with result: HandlerResult, _ connection: OpaquePointer,
        _ version: UnsafePointer<CChar>?, _ handler: HTTPHandler
    ) -> MHD_Result {
        switch result {
        case .respond(let response):
            return respond(exchange, response)
        case .hold:
            exchange.isSuspended = true
            suspended[ObjectIdentifier(exchange)] = exchange
            MHD_suspend_connection(connection)
            if exchange.watchesHangUp {
                watchHangUp(of: exchange)
                exchange.answersDirectly = mayAnswerDirectly(exchange, version: version)
            }
            return .YES
        case .stream(let stream, var headers):
            headers = Response.headers(headers, adding: exchange.extraHeaders)
            // MHD adds its own `Transfer-Encoding` to a stream of HTTP/1.1, but for a `HEAD` (`queueResponse`).
            let headOnly = exchange.method == "HEAD"
            let chunked: [(name: String, value: String)] =
                exchange.isHTTP11 && !headOnly ? [("Transfer-Encoding", "chunked")] : []
            guard fits(headerBytes: SharedResponse.headerBytes(of: headers + chunked), status: .ok, on: exchange)
            else {
                stream.close()
                let (fallback, result) = answerHeadersTooLarge(exchange)
                handler.responseFailed(exchange, status: .ok, fits: false, fallback: fallback)
                if let fallback { handler.didRespond(exchange, status: fallback) }
                return result
            }
            guard stream.queueResponse(status: .ok, headers: headers, headOnly: headOnly) else { return .NO }
            handler.didRespond(exchange, status: .ok)
            return .YES
        }
    }

    /// The exchange of a request, made when it is first handled, and kept as MHD's context for the request.
    private func start(
        _ connection: OpaquePointer, _ method: UnsafePointer<CChar>, _ url: UnsafePointer<CChar>,
        _ version: UnsafePointer<CChar>?, _ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> Exchange {
        let exchange = Exchange(
            connection: connection, method: String(cString: method),
            path: String(validatingCString: url) ?? Self.escapingNonASCII(url),
            isHTTP11: version.map { strcmp($0, "HTTP/1.1") == 0 } ?? false,
            headerEnd: chttpd_header_end(connection, method))
        exchange.targetHoldsNUL = targetHoldsNUL(connection, version)
        context.pointee = Unmanaged.passRetained(exchange).toOpaque()
        return exchange
    }

    /// A path that is not UTF-8, its bytes past ASCII and its `%` percent-encoded: the router decodes the segments
    /// back to the bytes sent, which are not UTF-8, and answers `400 bad_request`, as it does the same bytes sent
    /// encoded. `String(cString:)` replaced them with U+FFFD, which let a write through under another id (two
    /// different invalid ids named the same item); a `%` left as it was would let `\xC3%A9` decode to `é`.
    private static func escapingNonASCII(_ url: UnsafePointer<CChar>) -> String {
        var text = ""
        for byte in UnsafeBufferPointer(
            start: UnsafeRawPointer(url).assumingMemoryBound(to: UInt8.self), count: strlen(url))
        {
            if byte < 0x80 && byte != UInt8(ascii: "%") {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                text += "%" + String(byte, radix: 16, uppercase: true)
            }
        }
        return text
    }

    /// Whether a request may have a quick answer (`answerQuickly`): a `GET` or `HEAD` without a body or `Expect`,
    /// while the server is not stopping. Its answer is asked for in MHD's second call, as every answer is: MHD
    /// closes the connection after a response queued in the first.
    private func mayAnswerQuickly(
        _ connection: OpaquePointer, _ method: UnsafePointer<CChar>, _ url: UnsafePointer<CChar>
    ) -> Bool {
        guard
            (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) && !isQuiesced
                && MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length") == nil
                && MHD_lookup_connection_value(connection, .HEADER_KIND, "Transfer-Encoding") == nil
                && MHD_lookup_connection_value(connection, .HEADER_KIND, "Expect") == nil
        else { return false }
        // A missing `Host` or several are refused, and several `If-None-Match` lines read as one list, the usual way
        // (`headersArrived`, `Request.listHeader`); the quick way reads one line.
        // A header line libmicrohttpd misread is refused (`headersArrived`).
        var hosts: UInt32 = 0
        var tags: UInt32 = 0
        var misread: UInt32 = 0
        chttpd_count_headers(connection, method, "Host", "If-None-Match", &hosts, &tags, &misread)
        // An invalid `Host` or a malformed target is refused the usual way too, at once.
        guard hosts == 1, tags <= 1, misread == 0,
            let host = MHD_lookup_connection_value(connection, .HEADER_KIND, "Host"),
            Request.isValidHost(String(cString: host)),
            !UnsafeBufferPointer(start: UnsafeRawPointer(url).assumingMemoryBound(to: UInt8.self), count: strlen(url))
                .contains(where: { Request.isMalformedInTarget($0, inQuery: false) })
        else { return false }
        return !Exchange.hasMalformedQuery(connection)
    }

    /// Answers a request `mayAnswerQuickly` let through when the handler has a shared answer for it
    /// (`HTTPHandler.quickAnswer`): no `Exchange`, no `Request`, no route matching. False when the request is to
    /// take the usual way; nothing is queued then.
    private func answerQuickly(
        _ connection: OpaquePointer, _ method: UnsafePointer<CChar>, _ url: UnsafePointer<CChar>,
        _ handler: HTTPHandler
    ) -> Bool {
        let path = UnsafeBufferPointer(
            start: UnsafeRawPointer(url).assumingMemoryBound(to: UInt8.self), count: strlen(url))
        let answer = handler.quickAnswer(path: path) { name in
            // `withCString`: a short name is copied on the stack, where passing the String would allocate.
            name.withCString { MHD_lookup_connection_value(connection, .HEADER_KIND, $0).map { String(cString: $0) } }
        }
        guard let (route, response) = answer, response.isComplete, fits(response, on: connection),
            response.queue(on: connection)
        else { return false }
        let isHead = strcmp(method, "HEAD") == 0
        handler.didAnswerQuickly(method: isHead ? "HEAD" : "GET", path: path, route: route, status: response.status)
        return true
    }

    /// The request context of a request that may have a quick answer (`mayAnswerQuickly`), as an address: no object
    /// has it, and it is never dereferenced.
    private static let quickAnswerMark: UInt = 1

    /// The first call for a request carries only its headers. Everything that can be refused from them is decided
    /// here, before a byte of the body is read: a body announced too large, announced twice with different
    /// lengths or both by its length and as chunked, and a request without exactly one `Host`, are answered at once
    /// (which makes MHD close the connection: nothing after it can be trusted);
    /// other refusals are answered once the body has been read and discarded, so the connection stays usable.
    private func headersArrived(_ exchange: Exchange, _ handler: HTTPHandler) -> MHD_Result {
        // RFC 9112 §5.1 and §5.2: a space before a colon must be, and a folded line may be, refused with 400.
        // libmicrohttpd misreads both, so a conditional header would be lost and a `Content-Length` would let the
        // body be read as the next request: answered at once, the connection then closed.
        if exchange.misreadHeaderLines > 0 { return respond(exchange, handler.response(to: .malformedHeader)) }
        if exchange.targetHoldsNUL || exchange.request.hasMalformedTarget {
            return respond(exchange, handler.response(to: .malformedTarget))
        }
        var refusal = handler.screen(exchange)
        guard let announced = announcedLength(of: exchange.request.headers) else {
            return respond(exchange, handler.response(to: .conflictingContentLength))
        }
        // Answered at once, which makes MHD close the connection: with both, a front that framed the body by its
        // length and this server, which reads it chunked, would disagree on where the next request starts
        // (request smuggling; RFC 9112 §6.1 asks to close the connection after such a request).
        let transferCoding = exchange.request.header("Transfer-Encoding")
        if announced != nil, transferCoding != nil {
            return respond(exchange, handler.response(to: .lengthAndTransferCoding))
        }
        // RFC 9112 §3.2. libmicrohttpd 0.9.75, as this server runs it, lets both through (probed: an HTTP/1.1 request
        // without `Host` reached the handler).
        let hosts = exchange.request.headerLines("Host")
        if hosts > 1 || (hosts == 0 && exchange.isHTTP11) {
            return respond(exchange, handler.response(to: .hostMissingOrRepeated(lines: hosts)))
        }
        if let host = exchange.request.header("Host"), !Request.isValidHost(host) {
            return respond(exchange, handler.response(to: .invalidHost(host)))
        }
        if let coding = unsupportedTransferCoding(of: exchange.request.headers) {
            return respond(exchange, handler.response(to: .unsupportedTransferEncoding(coding)))
        }
        // libmicrohttpd checked the digits: one that does not fit in an `Int` is past any limit.
        let length = announced.map { Int($0) ?? .max } ?? 0
        if length > options.maxBodyBytes {
            exchange.droppedBodyBytes = length
            return respond(exchange, tooLarge(handler))
        }
        // libmicrohttpd reads a body into the connection's memory left after the headers; with none left it waits
        // for good, and the client with it (0.9.75, probed: headers that left one byte by `requestPoolBytes`, at
        // every `--connection-memory`). Answered at once: a refusal kept for after the body would never be sent.
        if length > 0 || transferCoding != nil,
            requestPoolBytes(of: exchange) + Self.bodyReadRoom > options.connectionMemory
        {
            return respond(exchange, handler.response(to: .headersTooLarge(limit: options.connectionMemory)))
        }
        if refusal == nil, !leavesRoomForCommittedAnswer(exchange) {
            refusal = handler.response(to: .headersTooLarge(limit: options.connectionMemory))
        }
        // Reserved as it arrives (`received`): a body that would not fit now is refused at once.
        if refusal == nil, length > 0, !options.bodyBudget.hasRoom(for: length) {
            refusal = handler.response(to: .bodyMemoryFull)
        }
        if let refusal {
            // A client that waits for `100 Continue` before its body gets the refusal instead, as nginx answers.
            if exchange.request.header("Expect")?.lowercased() == "100-continue" { return respond(exchange, refusal) }
            exchange.refusal = refusal
        }
        // Any `Transfer-Encoding` left is chunked: a body is to come.
        if length > 0 || transferCoding != nil { beginUpload(exchange) }
        return .YES
    }

    /// Whether the answer of a write, once committed, fits in the connection's memory next to the request's
    /// headers (`Exchange.committedAnswerHeaderBytes`); true for a request that writes nothing.
    private func leavesRoomForCommittedAnswer(_ exchange: Exchange) -> Bool {
        guard exchange.committedAnswerHeaderBytes > 0 else { return true }
        let headerBytes = exchange.committedAnswerHeaderBytes + SharedResponse.headerBytes(of: exchange.extraHeaders)
        return fits(headerBytes: headerBytes, status: .created, on: exchange)
    }

    /// `leavesRoomForCommittedAnswer` again once a chunked body's trailers are in: libmicrohttpd keeps them in the
    /// connection's memory too, so a write whose trailers took the room of its answer was committed and then
    /// closed without a word. Their bytes count toward the request's from now on, also when it is answered.
    private func leavesRoomForCommittedAnswerAfterTrailers(_ exchange: Exchange) -> Bool {
        guard exchange.committedAnswerHeaderBytes > 0 else { return true }
        var trailers = 0
        withUnsafeMutablePointer(to: &trailers) { total in
            _ = MHD_get_connection_values(
                exchange.connection, .FOOTER_KIND,
                { context, _, key, value in
                    guard let total = context?.assumingMemoryBound(to: Int.self) else { return .NO }
                    let line = (key.map { strlen($0) } ?? 0) + (value.map { strlen($0) } ?? 0) + 4
                    total.pointee += line + HTTPServer.poolBytesPerValue
                    return .YES
                }, total)
        }
        guard trailers > 0 else { return true }
        exchange.requestPoolBytes = requestPoolBytes(of: exchange) + trailers
        return leavesRoomForCommittedAnswer(exchange)
    }

    /// The `Content-Length` the request announces (nil inside when none), or nil when it announces two different
    /// ones.
    private func announcedLength(of headers: [(name: String, value: String)]) -> String?? {
        var announced: String?
        for header in headers where header.name == "content-length" {
            let length = header.value.trimmingSpaces()
            if let announced, announced != length { return nil }
            announced = length
        }
        return .some(announced)
    }

    /// A `Transfer-Encoding` other than libmicrohttpd's `chunked` (which it matches whole, in any case), if any:
    /// MHD would wait for a body whose end it cannot know until the client gives up (`gzip`, `gzip, chunked`).
    private func unsupportedTransferCoding(of headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name == "transfer-encoding" && $0.value.lowercased() != "chunked" }?.value
    }

    /// A piece of the body arrived: kept if the request may have it and the budget allows, else discarded.
    private func received(_ size: Int, _ upload: UnsafePointer<CChar>?, for exchange: Exchange, _ handler: HTTPHandler)
        -> MHD_Result
    {
        exchange.bodyProgress = MonotonicClock.now()
        if exchange.refusal != nil {
            exchange.discardedBodyBytes += size
            // A refused request may send its announced body; one that goes on past the limit is cut off.
            return exchange.discardedBodyBytes > options.maxBodyBytes ? .NO : .YES
        }
        let total = exchange.request.body.count + size
        guard exchange.droppedBodyBytes == 0, total <= options.maxBodyBytes, let upload else {
            let (dropped, overflow) = exchange.droppedBodyBytes.addingReportingOverflow(total)
            exchange.droppedBodyBytes = overflow ? .max : dropped
            // Its share of the body memory goes back now, not once its dropped rest has come.
            releaseBody(of: exchange)
            // A body far beyond the limit is not read to its end: the connection is closed.
            return exchange.droppedBodyBytes > 2 * options.maxBodyBytes ? .NO : .YES
        }
        if total > exchange.reservedBodyBytes {
            // Reserved as it comes (`MemoryBudget`): a client that announces a body and stalls holds none of it.
            guard options.bodyBudget.reserve(total - exchange.reservedBodyBytes) else {
                exchange.refusal = handler.response(to: .bodyMemoryFull)
                exchange.discardedBodyBytes = total
                // What it holds goes back now, not when its discarded rest has come: two bodies that run out of
                // room together would otherwise both be refused.
                releaseBody(of: exchange)
                return .YES
            }
            exchange.reservedBodyBytes = total
        }
        upload.withMemoryRebound(to: UInt8.self, capacity: size) {
            exchange.request.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
        }
        return .YES
    }

    private func tooLarge(_ handler: HTTPHandler) -> Response {
        handler.response(to: .bodyTooLarge(limit: options.maxBodyBytes))
    }

    static let accessHandler: MHD_AccessHandlerCallback = {
        server, connection, url, method, version, upload, uploadSize, context in
        guard let server, let connection, let url, let method, let uploadSize, let context else { return .NO }
        return Unmanaged<HTTPServer>.fromOpaque(server).takeUnretainedValue()
            .access(connection, url, method, version, uploadSize, context, upload)
    }

    /// A connection MHD starts or closes: its record (`HTTPServer+SlowHeaders.swift`) is made or let go; one this
    /// loop hands back (`handBack`) starts with the bytes its client had sent before, which `mayAnswerDirectly`
    /// needs.
    static let connectionNotice: MHD_NotifyConnectionCallback = { opaqueServer, connection, context, code in
        guard let opaqueServer, let connection, let context else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(opaqueServer).takeUnretainedValue()
        // `MHD_CONNECTION_NOTIFY_STARTED` (0) and `_CLOSED` (1): the constants do not import.
        switch code.rawValue {
        case 0: server.connectionStarted(connection, context)
        case 1: server.connectionClosed(context)
        default: break
        }
    }

    static let completedHandler: MHD_RequestCompletedCallback = { opaqueServer, _, context, code in
        guard let opaqueServer, let context, let opaque = context.pointee else { return }
        context.pointee = nil
        let server = Unmanaged<HTTPServer>.fromOpaque(opaqueServer).takeUnretainedValue()
        server.inFlight -= 1
        if UInt(bitPattern: opaque) == quickAnswerMark { return }
        let exchange = Unmanaged<Exchange>.fromOpaque(opaque).takeRetainedValue()
        if exchange.awaitsBody { server.uploadEnded(exchange, code: code) }
        if let status = server.unloggedEnd(of: exchange, code: code) {
            server.handler?.didRespond(exchange, status: status)
        }
        // An answer left for a call that did not come (the client left first): what it holds goes with it.
        exchange.pendingResponse = nil
        exchange.pendingResult = nil
        server.releaseBody(of: exchange)
        server.unwatch(exchange)
    }

    /// The status to log for a held request that MHD ended after its resume without calling the handler again
    /// (it read the end of the stream first, or a stop ended it), so that every request has its line, above all a
    /// mutation that took effect unanswered: the status it was let go with (`closeUnanswered`), or, for one resumed
    /// with its answer, `499` (the client hung up, or only shut its writing side down, which libmicrohttpd takes
    /// for the same) or `444` when a stop ended it (`MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN`, 3).
    private func unloggedEnd(of exchange: Exchange, code: MHD_RequestTerminationCode) -> HTTPStatus? {
        if let status = exchange.closesUnanswered { return status }
        guard exchange.pendingResponse != nil || exchange.pendingResult != nil else { return nil }
        return code.rawValue == 3 ? .closedWithoutAnswer : .clientClosedRequest
    }

    /// Notes where a request's target starts and its length up to its first NUL, before libmicrohttpd splits off
    /// its query (`targetHoldsNUL`).
    static let targetArrived: chttpd_uri_log_callback = { opaqueServer, uri, connection in
        guard let opaqueServer, let uri, let connection else { return nil }
        let server = Unmanaged<HTTPServer>.fromOpaque(opaqueServer).takeUnretainedValue()
        server.record(of: connection)?.target = (uri, strlen(uri))
        return nil
    }

    /// Whether the request's target holds a NUL, which libmicrohttpd hands over as the end of its C strings: `PUT
    /// /items/b<NUL>zz` wrote item `b`. libmicrohttpd ends the target where the request line's version begins
    /// (`version`, one byte further), so a target longer than its text up to the first NUL holds one. A version
    /// of none (an HTTP/0.9 line, refused anyway) is not libmicrohttpd's memory and tells nothing.
    func targetHoldsNUL(_ connection: OpaquePointer, _ version: UnsafePointer<CChar>?) -> Bool {
        guard let target = record(of: connection)?.target, let version, version.pointee != 0, version > target.start
        else { return false }
        return version - target.start - 1 != target.length
    }

    /// Keeps paths and query arguments as they came, so that the router splits the path before decoding each
    /// segment (an item id may contain an encoded `/`).
    static let identityUnescape: chttpd_unescape_callback = { _, _, text in
        text.map { strlen($0) } ?? 0
    }
}
