import Synchronization

/// One event loop of the server: its HTTP daemon (on a listening socket of its own, SO_REUSEPORT sharing the
/// port), its held polls, and its batched request log. Everything here runs on that loop's thread; the app,
/// the collections and the journal are shared by all workers.
final class Worker: HTTPHandler, @unchecked Sendable {
    // @unchecked: `feed` and the request log are touched only on this worker's loop thread; other threads reach
    // the worker through `post`.
    unowned let app: App
    let server: HTTPServer
    let feed: Feed
    let streams: StreamHub
    /// Request lines of the current loop turn, formatted straight into bytes.
    private var requestLog: [UInt8] = []
    private var requestLogLines = 0
    /// The time of the current loop turn, shared by its request lines.
    private var requestLogTimestamp: [UInt8]?
    /// Requests answered in a row with the same method, route and status, counted into `Metrics` together at the
    /// end of the loop turn or when another kind comes: a run of reads then takes the metrics' lock once, not once
    /// per request.
    private var pendingRequests = (method: "", route: "", status: 0, count: 0)

    init(app: App, server: HTTPServer) {
        self.app = app
        self.server = server
        feed = Feed(metrics: app.metrics, caching: app.feedCaching) { [unowned server] exchanges, response in
            server.answer(exchanges, with: response)
        }
        streams = StreamHub(metrics: app.metrics)
    }

    /// Runs `task` on this worker's loop thread.
    func post(_ task: @escaping @Sendable () -> Void) {
        server.post(task)
    }

    // MARK: HTTPHandler

    func screen(_ exchange: Exchange) -> Response? {
        let request = exchange.request
        exchange.extraHeaders = app.corsHeaders(for: request)
        let (passed, template, refusal) = app.screen(request)
        exchange.route = template
        exchange.screenedRoute = passed
        return refusal
    }

    func clientLeft(_ exchange: Exchange) -> Bool {
        feed.drop(exchange)
    }

    func responseFailed(_ exchange: Exchange, status: HTTPStatus, fallback: Bool) {
        app.metrics.responseFailed()
        guard app.logger.level <= .error else { return }
        let line =
            "\(Logger.timestamp()) error libmicrohttpd refused the \(status.rawValue) response to "
            + "\(escapedForLog(exchange.method)) \(escapedForLog(exchange.path)) (its headers do not fit the "
            + "connection's memory); " + (fallback ? "answered 500 instead" : "connection closed") + "\n"
        LogWriter.standardError.submit(Array(line.utf8), lines: 1)
    }

    func handle(_ exchange: Exchange) -> HandlerResult {
        let (route, result) = app.handle(
            exchange.request, screened: exchange.screenedRoute, on: ExchangeConnection(exchange, on: self))
        exchange.route = route
        switch result {
        case .respond(let response): return .respond(response)
        case .later: return .hold
        case .stream(let start):
            let stream = EventStream(
                connection: exchange.connection, isChunked: exchange.isHTTP11,
                resume: { [unowned server] in server.resumeStream($0) },
                firstWait: { [unowned server] in server.watchStream($0, on: $1) },
                wasCut: { [unowned server] in server.cutStream($0) })
            streams.open(stream, start)
            return .stream(stream, headers: ServerSentEvents.headers)
        }
    }

    func response(to refusal: Refusal) -> Response {
        switch refusal {
        case .bodyTooLarge(let limit): .error(.payloadTooLarge(limit: limit))
        case .stopped: .error(.stoppedBeforeCompletion)
        case .conflictingContentLength: .error(.conflictingContentLength)
        case .bodyMemoryFull: .error(.bodyMemoryFull(limit: app.config.maxBodyMemory))
        case .clientLeft: Response(.clientClosedRequest)
        }
    }

    func didRespond(_ exchange: Exchange, status: HTTPStatus) {
        countRequest(method: exchange.method, route: exchange.route, status: status.rawValue)
        guard app.logger.level <= .info else { return }
        let timestamp = requestLogTimestamp ?? Array((Logger.timestamp() + " info ").utf8)
        requestLogTimestamp = timestamp
        // Written into a local array moved out of the stored one and back: appending to the stored property byte
        // by byte checked exclusive access for every byte (a tenth of a fan-out's answers).
        var log: [UInt8] = []
        swap(&log, &requestLog)
        log += timestamp
        Self.appendEscaped(exchange.method, to: &log)
        log.append(UInt8(ascii: " "))
        Self.appendEscaped(exchange.path, to: &log)
        log.append(UInt8(ascii: " "))
        Self.appendDecimal(status.rawValue, to: &log)
        log.append(UInt8(ascii: " "))
        Self.appendDecimal(Int(MonotonicClock.now() - exchange.started), to: &log)
        log += [UInt8(ascii: "m"), UInt8(ascii: "s"), UInt8(ascii: "\n")]
        swap(&log, &requestLog)
        requestLogLines += 1
    }

    var nextDeadline: Int64? {
        switch (feed.nextDeadline, streams.nextDeadline) {
        case (let polls?, let heartbeat?): min(polls, heartbeat)
        case (let polls, let heartbeat): polls ?? heartbeat
        }
    }

    func tick(now: Int64) {
        feed.expire(now: now)
        streams.tick(now: now)
    }

    /// Request lines of one loop turn go to the log's writer thread in one batch: a change fanned out to 10,000
    /// polls logs 10,000 lines without 10,000 system calls, and the loop never waits for stderr.
    func loopDidRun() {
        flushRequestCounts()
        guard !requestLog.isEmpty else { return }
        LogWriter.standardError.submit(requestLog, lines: requestLogLines)
        requestLog.removeAll(keepingCapacity: true)
        requestLogLines = 0
        requestLogTimestamp = nil
    }

    private func countRequest(method: String, route: String, status: Int) {
        if pendingRequests.count > 0, pendingRequests.status == status, pendingRequests.route == route,
            pendingRequests.method == method
        {
            pendingRequests.count += 1
            return
        }
        flushRequestCounts()
        pendingRequests = (method, route, status, 1)
    }

    private func flushRequestCounts() {
        guard pendingRequests.count > 0 else { return }
        let (method, route, status, count) = pendingRequests
        app.metrics.request(method: method, route: route, status: status, count: count)
        pendingRequests.count = 0
    }

    /// Control bytes, DEL, bytes past ASCII, `"` and `\` are written as `\xHH` (as nginx escapes its log):
    /// a request line cannot forge a log line nor a terminal sequence.
    private static func appendEscaped(_ text: String, to log: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            guard bytes.contains(where: logNeedsEscape) else { return log.append(contentsOf: bytes) }
            for byte in bytes {
                if logNeedsEscape(byte) { log += logEscape(byte) } else { log.append(byte) }
            }
        }
    }

    /// Writes the digits from the most significant down, so that nothing is reversed in place afterwards.
    private static func appendDecimal(_ value: Int, to log: inout [UInt8]) {
        let value = max(value, 0)
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            log.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}

/// Whether a byte of a request is written escaped in the log.
func logNeedsEscape(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
}

/// `\xHH` for a byte.
func logEscape(_ byte: UInt8) -> [UInt8] {
    let digits = Array("0123456789ABCDEF".utf8)
    return [UInt8(ascii: "\\"), UInt8(ascii: "x"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
}

/// Text from a request, escaped as the request log escapes it.
func escapedForLog(_ text: String) -> String {
    var bytes: [UInt8] = []
    for byte in text.utf8 { bytes += logNeedsEscape(byte) ? logEscape(byte) : [byte] }
    return String(decoding: bytes, as: UTF8.self)
}
