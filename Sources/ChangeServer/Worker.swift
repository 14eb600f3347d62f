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
    /// Request lines of the current loop turn.
    private var requestLog = RequestLogBatch()
    /// Whether requests are logged (`--log-level` info or below), read once.
    private let logsRequests: Bool
    /// Requests answered in a row with the same method, route and status, counted into `Metrics` together at the
    /// end of the loop turn or when another kind comes: a run of reads then takes the metrics' lock once, not once
    /// per request.
    private var pendingRequests = (method: "", route: "", status: 0, count: 0)
    /// Quick answers of this loop turn (`didAnswerQuickly`), counted into `Metrics` at its end.
    private var quickReads = 0
    /// The lines this loop writes at most once a minute (`connectionLimitReached`, `responseFailed`,
    /// `responseMemoryWasFull`).
    private let limitWarning = OncePerMinute()
    private let responseFailureLog = OncePerMinute()
    private let responseMemoryWarning = OncePerMinute()

    init(app: App, server: HTTPServer) {
        self.app = app
        self.server = server
        logsRequests = app.logger.level <= .info
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
        exchange.extraHeadersAreTheSameForAll = app.sameCORSHeadersForAll != nil
        let (passed, template, refusal) = app.screen(request)
        exchange.route = template
        exchange.screenedRoute = passed
        if passed != nil, request.method == "PUT" || request.method == "POST" || request.method == "DELETE" {
            exchange.committedAnswerHeaderBytes = App.committedAnswerHeaderBytes
        }
        return refusal
    }

    func clientLeft(_ exchange: Exchange) -> Bool {
        feed.drop(exchange)
    }

    /// Counted every time; logged at most once a minute per loop: a client causes it at will (headers that fill
    /// the connection's memory), and a line per request, each written at once, was a log flood on demand.
    func responseFailed(_ exchange: Exchange, status: HTTPStatus, fits: Bool, fallback: HTTPStatus?) {
        app.metrics.responseFailed()
        guard app.logger.level <= .error else { return }
        guard responseFailureLog.allows() else { return }
        let request = "\(escapedForLog(exchange.method)) \(escapedForLog(exchange.path))"
        let failure =
            fits
            ? "libmicrohttpd refused the \(status.rawValue) response to \(request)"
            : "the \(status.rawValue) response to \(request) does not fit the connection's memory next to the "
                + "request's headers"
        let outcome = fallback.map { "answered \($0.rawValue) instead" } ?? "connection closed"
        let line =
            "\(Logger.timestamp()) error \(failure); \(outcome) (logged at most once a minute; "
            + "changeserver_response_failures_total counts each)\n"
        LogWriter.standardError.submit(Array(line.utf8), lines: 1, urgent: true)
    }

    /// Logged at most once a minute per loop (each refusal is a `503` in the request log and its metrics).
    private func responseMemoryWasFull(limit: Int) {
        guard responseMemoryWarning.allows() else { return }
        app.logger.warning(
            "answers not yet taken by their clients hold --max-response-memory (\(limit) bytes): reads of answers "
                + "over 1 MiB get 503 until clients take theirs or their connections time out (logged at most once "
                + "a minute)")
    }

    /// Counted every time; logged at most once a minute per loop, so that a server kept at its limit says so
    /// without a line per connection.
    func connectionLimitReached(limit: Int) {
        app.metrics.connectionLimitReached()
        guard limitWarning.allows() else { return }
        app.logger.warning(
            "an event loop holds its share of --max-connections open (\(limit)): new connections wait in the listen "
                + "backlog until one closes")
    }

    /// A record in the file journal takes effect all the same; one for PostgreSQL only if its commit was sent
    /// and succeeded, which a stop while the database hangs may never learn.
    func stoppedWaiting(forSubmitted count: Int) {
        let outcome =
            app.committer.isShared
            ? "each takes effect only if its commit reached PostgreSQL (read before writing it again)"
            : "they take effect all the same (now, or when the journal is replayed)"
        app.logger.warning(
            "an event loop stops with \(count) mutations not answered yet (each loop says its own): their connections "
                + "are closed unanswered; \(outcome)")
    }

    func handle(_ exchange: Exchange) -> HandlerResult {
        let (route, result) = app.handle(
            exchange.request, screened: exchange.screenedRoute, on: ExchangeConnection(exchange, on: self))
        exchange.route = route
        switch result {
        case .respond(let response): return .respond(response)
        case .later: return .hold
        case .stream(let start): return open(start, on: exchange)
        }
    }

    /// Starts the event stream `start` on a held exchange (loop thread only): its first event was made off the loop.
    /// A stop or the held-connection limit reached meanwhile answers it as the route would have (`503`, `429`):
    /// a stream opened after the hub's stop began would never be ended, and streams that all passed the limit's
    /// check while their snapshot was encoded would take the connections kept back for everything else.
    func startStream(_ start: StreamStart, on exchange: Exchange) {
        if app.currentState != .serving {
            return server.answer(exchange, with: app.errorResponse(.shuttingDown, exchange.request))
        }
        if app.metrics.heldConnections >= app.config.maxHeldPolls {
            let refusal = app.errorResponse(.tooManyPolls(limit: app.config.maxHeldPolls), exchange.request)
            return server.answer(exchange, with: refusal)
        }
        // Unowned: the closure is kept by the exchange it opens the stream on.
        server.resume(exchange) { [self, unowned exchange] in open(start, on: exchange) }
    }

    private func open(_ start: StreamStart, on exchange: Exchange) -> HandlerResult {
        let stream = EventStream(
            connection: exchange.connection, isChunked: exchange.isHTTP11,
            resume: { [unowned server] in server.resumeStream($0) },
            firstWait: { [unowned server] in server.watchStream($0, on: $1) },
            wasCut: { [unowned server] in server.cutStream($0) })
        streams.open(stream, start)
        return .stream(stream, headers: ServerSentEvents.headers(app.feedCaching))
    }

    /// Refusals are never stored by caches, on the feed or elsewhere.
    func response(to refusal: Refusal) -> Response {
        if case .responseMemoryFull(let limit) = refusal { responseMemoryWasFull(limit: limit) }
        var response = refusalResponse(refusal)
        response.headers.append(("Cache-Control", app.feedCaching.cacheControl(.notStored)))
        return response
    }

    private func refusalResponse(_ refusal: Refusal) -> Response {
        switch refusal {
        case .bodyTooLarge(let limit): .error(.payloadTooLarge(limit: limit))
        case .stopped: .error(.stoppedBeforeCompletion)
        case .conflictingContentLength: .error(.conflictingContentLength)
        case .lengthAndTransferCoding: .error(.lengthAndTransferCoding)
        case .hostMissingOrRepeated(let lines): .error(.hostMissingOrRepeated(lines: lines))
        case .invalidHost(let value): .error(.invalidHost(value))
        case .malformedTarget: .error(.malformedTarget)
        case .malformedHeader: .error(.malformedHeader)
        case .bodyMemoryFull: .error(.bodyMemoryFull(limit: app.config.maxBodyMemory))
        case .responseMemoryFull(let limit): .error(.responseMemoryFull(limit: limit))
        case .headersTooLarge(let limit): .error(.headersTooLarge(limit: limit))
        case .unsupportedTransferEncoding(let coding): .error(.unsupportedTransferEncoding(coding))
        case .bodyTimedOut(let seconds): .error(.bodyTimedOut(seconds: seconds))
        case .headersTimedOut(let seconds): .error(.headersTimedOut(seconds: seconds))
        }
    }

    func didRespond(_ exchange: Exchange, status: HTTPStatus) {
        countRequest(method: exchange.method, route: exchange.route, status: status.rawValue)
        guard logsRequests else { return }
        var path = exchange.path
        path.withUTF8 { path in
            requestLog.add(
                method: exchange.method, path: path, status: status.rawValue,
                milliseconds: Int(MonotonicClock.now() - exchange.started))
        }
    }

    /// Logged as nginx logs it, with `-` for the request line, which the server never saw (libmicrohttpd had not
    /// all of the headers).
    func headersTimedOut(milliseconds: Int) {
        countRequest(method: "-", route: "unmatched", status: HTTPStatus.requestTimeout.rawValue)
        guard logsRequests else { return }
        var path = "-"
        path.withUTF8 { path in
            requestLog.add(
                method: "-", path: path, status: HTTPStatus.requestTimeout.rawValue, milliseconds: milliseconds)
        }
    }

    func quickAnswer(path: UnsafeBufferPointer<UInt8>, header: (String) -> String?)
        -> (route: String, response: SharedResponse)?
    {
        guard let (route, response) = app.quickRead(path: path, header: header), let share = response.share,
            let extra = app.sameCORSHeadersForAll
        else { return nil }
        return (route, share.shared(response, adding: extra))
    }

    /// A quick answer is queued as soon as the request's headers are read: it took no time worth a millisecond.
    func didAnswerQuickly(method: String, path: UnsafeBufferPointer<UInt8>, route: String, status: HTTPStatus) {
        countRequest(method: method, route: route, status: status.rawValue)
        quickReads += 1
        if logsRequests { requestLog.add(method: method, path: path, status: status.rawValue, milliseconds: 0) }
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
    /// polls logs 10,000 lines without 10,000 system calls, and the loop never waits for stderr. The writer
    /// collects batches for a moment (`LogWriter.flushInterval`) before it writes them.
    func loopDidRun() {
        flushRequestCounts()
        guard requestLog.lines > 0 else { return }
        LogWriter.standardError.submit(requestLog.bytes, lines: requestLog.lines)
        requestLog.removeAll()
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
        if quickReads > 0 {
            app.metrics.quickReadsAnswered(quickReads)
            quickReads = 0
        }
        guard pendingRequests.count > 0 else { return }
        let (method, route, status, count) = pendingRequests
        app.metrics.request(method: method, route: route, status: status, count: count)
        pendingRequests.count = 0
    }
}
