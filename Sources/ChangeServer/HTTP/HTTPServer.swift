import CHTTPD
import Glibc
import Synchronization

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
}

/// The application behind the HTTP server. Every call comes on the server's loop thread.
protocol HTTPHandler: AnyObject {
    /// Headers every response to this request carries (CORS), decided when its headers arrive.
    func headers(for request: Request) -> [(name: String, value: String)]
    /// Handles a complete request; `.hold` leaves the exchange to be answered later with `HTTPServer.answer`.
    func handle(_ exchange: Exchange) -> HandlerResult
    /// The response to a request the server refuses itself.
    func response(to refusal: Refusal) -> Response
    /// A response was queued: one log line and the request metrics.
    func didRespond(_ exchange: Exchange, status: HTTPStatus)
    /// The earliest deadline (monotonic milliseconds) the handler wants to be woken for, if any.
    var nextDeadline: Int64? { get }
    /// The loop woke up: expire what is due.
    func tick(now: Int64)
    /// One turn of the loop is done: flush what was batched (log lines).
    func loopDidRun()
}

/// libmicrohttpd driven by one loop thread of our own: the daemon runs in `MHD_USE_EPOLL` mode without internal
/// threads, and the loop waits on the daemon's epoll descriptor together with an eventfd that other threads
/// signal. STYLE.md explains why: MHD's internal epoll thread can hang under load, and a resume does not wake
/// a wait on the daemon's epoll descriptor, so every resume is followed by another `MHD_run`.
///
/// All handler calls, suspends and resumes happen on the loop thread, so a connection is never resumed before it
/// is suspended and no lock is held while MHD writes to sockets.
final class HTTPServer: @unchecked Sendable {
    // @unchecked: mutable state below is touched only on the loop thread; other threads reach the loop only
    // through `post`, whose queue is a Mutex.
    struct Options {
        var maxBodyBytes: Int
        var connectionLimit: Int
        /// Seconds an idle keep-alive connection is kept (held polls are suspended and not timed by MHD).
        var idleTimeout: Int
        /// Bytes of MHD's per-connection memory pool: request headers and response headers live in it, and it
        /// is most of what a held poll costs.
        var connectionMemory: Int
    }

    private let options: Options
    private var daemon: OpaquePointer?
    private let loopEpoll: Int32
    private let wakeDescriptor: Int32
    private let tasks = Mutex<[@Sendable () -> Void]>([])
    /// Set by `run` for the length of the loop: MHD calls back only from inside `MHD_run`, which only `run` calls.
    private var handler: HTTPHandler?
    private var runAgain = false
    private var stopDeadline: Int64?
    /// Requests begun and not completed: what a stop waits for (idle keep-alive connections are just closed).
    private var inFlight = 0
    /// Exchanges suspended now: a stop must resume every one before `MHD_stop_daemon`, which aborts otherwise.
    private var suspended: [ObjectIdentifier: Exchange] = [:]

    init(listener: Listener.Bound, options: Options) throws(StartupError) {
        self.options = options
        loopEpoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard loopEpoll >= 0, wakeDescriptor >= 0 else { throw StartupError("cannot create the event loop") }
        let flags = MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        daemon = chttpd_start_daemon(
            flags, listener.descriptor, Self.accessHandler, Unmanaged.passUnretained(self).toOpaque(),
            Self.completedHandler, Unmanaged.passUnretained(self).toOpaque(), UInt32(options.connectionLimit),
            UInt32(options.idleTimeout), options.connectionMemory, Self.identityUnescape)
        guard let daemon else { throw StartupError("libmicrohttpd could not start") }
        watch(chttpd_epoll_fd(daemon))
        watch(wakeDescriptor)
    }

    private func watch(_ descriptor: Int32) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = descriptor
        epoll_ctl(loopEpoll, EPOLL_CTL_ADD, descriptor, &event)
    }

    /// Runs the loop on the calling thread, calling `handler` for every request, until `stop` has drained the
    /// connections (or its grace period ended).
    func run(handler: HTTPHandler) {
        guard let daemon else { return }
        self.handler = handler
        defer { self.handler = nil }
        var events = [epoll_event](repeating: epoll_event(), count: 4)
        while true {
            let now = MonotonicClock.now()
            if let stopDeadline {
                // Half a second after the grace period, for the answers given at its end to go out.
                if inFlight == 0 || now >= stopDeadline + 500 { break }
                if now >= stopDeadline && !suspended.isEmpty { answerSuspendedOnStop() }
            }
            let timeout = runAgain ? 0 : waitTimeout(now: now)
            runAgain = false
            _ = epoll_wait(loopEpoll, &events, Int32(events.count), timeout)
            var counter: UInt64 = 0
            _ = read(wakeDescriptor, &counter, 8)
            for task in tasks.withLock({ queued in
                defer { queued.removeAll() }
                return queued
            }) { task() }
            handler.tick(now: MonotonicClock.now())
            MHD_run(daemon)
            handler.loopDidRun()
        }
        MHD_stop_daemon(daemon)
        self.daemon = nil
    }

    private func waitTimeout(now: Int64) -> Int32 {
        var timeout: Int64 = 1000
        var daemonTimeout: UInt64 = 0
        if let daemon, MHD_get_timeout(daemon, &daemonTimeout) == .YES {
            timeout = min(timeout, Int64(clamping: daemonTimeout))
        }
        if let deadline = handler?.nextDeadline { timeout = min(timeout, max(0, deadline - now)) }
        if let stopDeadline { timeout = min(timeout, max(0, stopDeadline - now), 50) }
        return Int32(timeout)
    }

    /// Runs `task` on the loop thread soon; callable from any thread.
    func post(_ task: @escaping @Sendable () -> Void) {
        tasks.withLock { $0.append(task) }
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
    }

    /// Answers a held exchange with a response of its own (loop thread only).
    func answer(_ exchange: Exchange, with response: Response) {
        var response = response
        response.headers += exchange.extraHeaders
        answer(exchange, with: SharedResponse(response))
    }

    /// Answers a held exchange (loop thread only).
    func answer(_ exchange: Exchange, with response: SharedResponse) {
        guard exchange.isSuspended else { return }
        exchange.isSuspended = false
        suspended[ObjectIdentifier(exchange)] = nil
        exchange.pendingResponse = response
        MHD_resume_connection(exchange.connection)
        runAgain = true
    }

    /// Resumes a connection an event stream suspended in its content reader (loop thread only).
    func resumeStream(_ connection: OpaquePointer) {
        MHD_resume_connection(connection)
        runAgain = true
    }

    /// The grace period is over and requests are still held (mutations whose sync has not come back): they get
    /// `503` with `Retry-After`, so that no client is left with a reset connection.
    private func answerSuspendedOnStop() {
        guard let handler else { return }
        let response = handler.response(to: .stopped)
        for exchange in Array(suspended.values) { answer(exchange, with: response) }
    }

    /// Stops accepting connections and lets the open ones finish for at most `grace` milliseconds (loop thread).
    func stop(grace: Int64) {
        guard stopDeadline == nil, let daemon else { return }
        let listener = MHD_quiesce_daemon(daemon)
        if listener >= 0 { close(listener) }
        stopDeadline = MonotonicClock.now() + grace
        runAgain = true
    }

    // MARK: libmicrohttpd callbacks

    private func access(
        _ connection: OpaquePointer, _ url: UnsafePointer<CChar>, _ method: UnsafePointer<CChar>,
        _ uploadSize: UnsafeMutablePointer<Int>, _ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
        _ upload: UnsafePointer<CChar>?
    ) -> MHD_Result {
        guard let handler else { return .NO }
        guard let opaque = context.pointee else {
            // The first call carries only the headers: answering now would make MHD close the connection, which
            // is what a body announced too large deserves and nothing else does.
            let exchange = Exchange(connection: connection, method: String(cString: method), path: String(cString: url))
            context.pointee = Unmanaged.passRetained(exchange).toOpaque()
            inFlight += 1
            exchange.extraHeaders = handler.headers(for: exchange.request)
            if let length = exchange.request.header("Content-Length").flatMap(Int.init), length > options.maxBodyBytes {
                exchange.droppedBodyBytes = length
                respond(exchange, tooLarge(handler))
            }
            return .YES
        }
        let exchange = Unmanaged<Exchange>.fromOpaque(opaque).takeUnretainedValue()
        if let pending = exchange.pendingResponse {
            exchange.pendingResponse = nil
            finish(exchange, pending)
            return .YES
        }
        if uploadSize.pointee > 0 {
            let size = uploadSize.pointee
            uploadSize.pointee = 0
            if exchange.droppedBodyBytes == 0, exchange.request.body.count + size <= options.maxBodyBytes, let upload {
                upload.withMemoryRebound(to: UInt8.self, capacity: size) {
                    exchange.request.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
                }
            } else {
                exchange.droppedBodyBytes += exchange.request.body.count + size
                exchange.request.body = []
                // A body far beyond the limit is not read to its end: the connection is closed.
                if exchange.droppedBodyBytes > 2 * options.maxBodyBytes { return .NO }
            }
            return .YES
        }
        if exchange.droppedBodyBytes > 0 {
            respond(exchange, tooLarge(handler))
            return .YES
        }
        switch handler.handle(exchange) {
        case .respond(let response):
            respond(exchange, response)
        case .hold:
            exchange.isSuspended = true
            suspended[ObjectIdentifier(exchange)] = exchange
            MHD_suspend_connection(connection)
        case .stream(let stream, let headers):
            guard stream.queueResponse(status: .ok, headers: headers + exchange.extraHeaders) else {
                return .NO
            }
            handler.didRespond(exchange, status: .ok)
        }
        return .YES
    }

    private func tooLarge(_ handler: HTTPHandler) -> Response {
        handler.response(to: .bodyTooLarge(limit: options.maxBodyBytes))
    }

    private func respond(_ exchange: Exchange, _ response: Response) {
        var response = response
        response.headers += exchange.extraHeaders
        finish(exchange, SharedResponse(response))
    }

    private func finish(_ exchange: Exchange, _ response: SharedResponse) {
        _ = response.queue(on: exchange.connection)
        handler?.didRespond(exchange, status: response.status)
    }

    private static let accessHandler: MHD_AccessHandlerCallback = {
        server, connection, url, method, _, upload, uploadSize, context in
        guard let server, let connection, let url, let method, let uploadSize, let context else { return .NO }
        return Unmanaged<HTTPServer>.fromOpaque(server).takeUnretainedValue()
            .access(connection, url, method, uploadSize, context, upload)
    }

    private static let completedHandler: MHD_RequestCompletedCallback = { server, _, context, _ in
        guard let server, let context, let opaque = context.pointee else { return }
        Unmanaged<Exchange>.fromOpaque(opaque).release()
        context.pointee = nil
        Unmanaged<HTTPServer>.fromOpaque(server).takeUnretainedValue().inFlight -= 1
    }

    /// Keeps paths and query arguments as they came, so that the router splits the path before decoding each
    /// segment (an item id may contain an encoded `/`).
    private static let identityUnescape: chttpd_unescape_callback = { _, _, text in
        text.map { strlen($0) } ?? 0
    }
}
