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
    /// The time of the current loop turn, shared by its request lines.
    private var requestLogTimestamp: [UInt8]?

    init(app: App, server: HTTPServer) {
        self.app = app
        self.server = server
        feed = Feed(metrics: app.metrics, caching: app.feedCaching) { [unowned server] exchange, response in
            server.answer(exchange, with: response)
        }
        streams = StreamHub(metrics: app.metrics)
    }

    /// Runs `task` on this worker's loop thread.
    func post(_ task: @escaping @Sendable () -> Void) {
        server.post(task)
    }

    // MARK: HTTPHandler

    func headers(for request: Request) -> [(name: String, value: String)] {
        app.corsHeaders(for: request)
    }

    func handle(_ exchange: Exchange) -> HandlerResult {
        let (route, result) = app.handle(exchange.request, on: ExchangeConnection(exchange, on: self))
        exchange.route = route
        switch result {
        case .respond(let response): return .respond(response)
        case .later: return .hold
        case .stream(let start):
            let stream = EventStream(connection: exchange.connection) { [unowned server] in server.resumeStream($0) }
            streams.open(stream, start)
            return .stream(stream, headers: ServerSentEvents.headers)
        }
    }

    func response(to refusal: Refusal) -> Response {
        switch refusal {
        case .bodyTooLarge(let limit): .error(.payloadTooLarge(limit: limit))
        case .stopped: .error(.stoppedBeforeCompletion)
        }
    }

    func didRespond(_ exchange: Exchange, status: HTTPStatus) {
        app.metrics.request(method: exchange.method, route: exchange.route, status: status.rawValue)
        guard app.logger.level <= .info else { return }
        let timestamp = requestLogTimestamp ?? Array((Logger.timestamp() + " info ").utf8)
        requestLogTimestamp = timestamp
        requestLog += timestamp
        requestLog += exchange.method.utf8
        requestLog.append(UInt8(ascii: " "))
        requestLog += exchange.path.utf8
        requestLog.append(UInt8(ascii: " "))
        appendDecimal(status.rawValue)
        requestLog.append(UInt8(ascii: " "))
        appendDecimal(Int(MonotonicClock.now() - exchange.started))
        requestLog += [UInt8(ascii: "m"), UInt8(ascii: "s"), UInt8(ascii: "\n")]
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

    /// Request lines of one loop turn go out in one write: a change fanned out to 10,000 polls logs 10,000
    /// lines without 10,000 system calls.
    func loopDidRun() {
        guard !requestLog.isEmpty else { return }
        writeToStandardError(requestLog)
        requestLog.removeAll(keepingCapacity: true)
        requestLogTimestamp = nil
    }

    private func appendDecimal(_ value: Int) {
        guard value > 0 else { return requestLog.append(UInt8(ascii: "0")) }
        let start = requestLog.count
        var rest = value
        while rest > 0 {
            requestLog.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        requestLog[start...].reverse()
    }
}
