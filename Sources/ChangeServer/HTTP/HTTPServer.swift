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
    /// The request announces its body length twice, differently: the body's end cannot be known.
    case conflictingContentLength
    /// The request has both `Content-Length` and `Transfer-Encoding`.
    case lengthAndTransferCoding
    /// An HTTP/1.1 request without `Host`, or any request with several (RFC 9112 §3.2).
    case hostMissingOrRepeated(lines: Int)
    /// A header line folded onto the next (obs-fold, RFC 9112 §5.2), or whose name has a space or another
    /// character no name has (§5.1), which libmicrohttpd misreads.
    case malformedHeader
    /// The bodies in flight on all connections already fill `--max-body-memory`.
    case bodyMemoryFull
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
        /// Seconds a request body may go without a byte arriving before it is answered `408` (`--body-timeout`).
        var bodyTimeout: Int
        /// Seconds a request's headers may take, from their first bytes seen, before it is answered `408`
        /// (`--header-timeout`).
        var headerTimeout: Int
        /// Bytes of MHD's per-connection memory pool: request headers and response headers live in it, and it
        /// is most of what a held poll costs.
        var connectionMemory: Int
        /// Connections from one address at once on this loop (0: no limit).
        var perAddressLimit: Int = 0
        /// Memory for request bodies, shared by all loops.
        var bodyBudget: BodyBudget
    }

    /// Seconds libmicrohttpd keeps a connection that shows no activity (an idle keep-alive connection, a stalled
    /// request), closing it without an answer.
    static let idleTimeout = 120

    let options: Options
    private(set) var daemon: OpaquePointer?
    let loopEpoll: Int32
    private let wakeDescriptor: Int32
    private let tasks = Mutex<[@Sendable () -> Void]>([])
    /// The tasks the loop is running, taken from `tasks` (loop thread only).
    private var runningTasks: [@Sendable () -> Void] = []
    /// Set by `run` for the length of the loop: MHD calls back only from inside `MHD_run`, which only `run` calls.
    private(set) var handler: HTTPHandler?
    var runAgain = false
    private(set) var stopDeadline: Int64?
    /// During a stop, the loop runs at least until then (monotonic milliseconds): for the connections let go last
    /// to be closed.
    private var continueUntil: Int64 = 0
    /// Requests begun and not completed: what a stop waits for (idle keep-alive connections are just closed).
    private var inFlight = 0
    /// Exchanges suspended now: a stop must resume every one before `MHD_stop_daemon`, which aborts otherwise.
    private var suspended: [ObjectIdentifier: Exchange] = [:]
    /// Held polls by their socket, watched for hang-up on the loop's epoll: MHD never reads a suspended
    /// connection, so without this a client that left would pin its descriptor until the poll's timeout. Uploads
    /// still arriving are watched here too (`watchUploads`).
    private var watched: [Int32: Exchange] = [:]
    /// Event streams watched for hang-up, by socket.
    private var watchedStreams: [Int32: EventStream] = [:]
    /// Sockets this loop has registered on its epoll for hang-up (one-shot registrations outlive their poll).
    var registeredDescriptors: Set<Int32> = []
    // Held polls answered outside libmicrohttpd (HTTPServer+DirectAnswers.swift).
    /// What MHD's side of a connection answered outside it is pointed at before MHD closes it (an eventfd).
    let placeholder: Int32
    /// Answered outside MHD inside its callbacks in this loop turn, to be sent after its `MHD_run`.
    var toSend: [(Exchange, SharedResponse)] = []
    /// Answered outside MHD in this loop turn, to be logged at its end.
    var answeredNow: [(Exchange, SharedResponse)] = []
    /// Whether the loop thread is inside `MHD_run` (where MHD calls back), so that MHD cannot be run again.
    var insideLibrary = false
    /// Whether MHD was given its pass before this loop turn's first answer outside it.
    var libraryFlushed = false
    /// Answered outside MHD, the whole answer sent: their MHD side is let go and their socket handed back.
    var answeredDirectly: [Exchange] = []
    /// Answered outside MHD, the rest of the answer waiting for room in the socket, by socket.
    var writing: [Int32: PendingWrite] = [:]
    /// Bytes the client had sent before the connection MHD is being handed (read when MHD reports it started).
    var handedBackBase: Int64?
    // Request bodies still arriving (HTTPServer+Uploads.swift).
    /// Requests whose bodies began to arrive in this loop turn: those not whole by its end are watched.
    var newUploads: [Exchange] = []
    /// Bodies still arriving after the turn they began in, watched for hang-up and for `--body-timeout`.
    var slowUploads: [ObjectIdentifier: Exchange] = [:]
    /// No slow upload times out before then (monotonic milliseconds); nil when none is watched.
    var nextUploadExpiry: Int64?
    // Requests whose headers trickle in (HTTPServer+SlowHeaders.swift).
    /// The connections MHD holds on this loop, in no order.
    var connectionRecords: [ConnectionRecord] = []
    /// `connectionRecords.count`, for `/metrics` on another thread.
    let openConnections = Atomic<Int>(0)
    /// When the last loop turn looked at connections (monotonic milliseconds), the looks owed since, in
    /// thousandths, and the place in `connectionRecords` of the next one to look at.
    var lastHeaderLook: Int64 = 0
    var headerLooksOwed = 0
    var nextHeaderLook = 0

    init(listener: Listener.Bound, options: Options) throws(StartupError) {
        self.options = options
        loopEpoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        placeholder = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard loopEpoll >= 0, wakeDescriptor >= 0, placeholder >= 0 else {
            throw StartupError("cannot create the event loop")
        }
        let flags = MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        daemon = chttpd_start_daemon(
            flags, listener.descriptor, Self.accessHandler, Unmanaged.passUnretained(self).toOpaque(),
            Self.completedHandler, Unmanaged.passUnretained(self).toOpaque(), UInt32(options.connectionLimit),
            UInt32(options.idleTimeout), options.connectionMemory, UInt32(options.perAddressLimit),
            Self.identityUnescape, Self.connectionNotice, Unmanaged.passUnretained(self).toOpaque())
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
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while true {
            let now = MonotonicClock.now()
            if let stopDeadline {
                // Half a second after the grace period, for the answers given at its end to go out; longer while
                // mutations whose records are in the journal wait for their outcome (`awaitSubmitted`).
                if now >= stopDeadline && !suspended.isEmpty { answerSuspendedOnStop() }
                if now >= stopDeadline && awaitSubmitted(now: now) { continueUntil = max(continueUntil, now + 500) }
                if inFlight == 0 || now >= max(stopDeadline + 500, continueUntil) { break }
                if now >= stopDeadline && !writing.isEmpty { abandonWrites() }
            }
            let timeout = runAgain ? 0 : waitTimeout(now: now)
            runAgain = false
            let ready = epoll_wait(loopEpoll, &events, Int32(events.count), timeout)
            let readyEvents = events.prefix(Int(max(0, ready)))
            // The wake descriptor stays readable until it is read: a post that comes after this read wakes the
            // next wait. Reading it only when it is ready spares a busy loop a system call per turn.
            if readyEvents.contains(where: { $0.data.fd == wakeDescriptor }) {
                var counter: UInt64 = 0
                _ = read(wakeDescriptor, &counter, 8)
            }
            runTasks()
            for event in readyEvents {
                if writing[event.data.fd] != nil {
                    continueWriting(event.data.fd, events: event.events)
                } else if event.events & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                    hungUp(event.data.fd)
                } else if event.events & EPOLLOUT.rawValue != 0 {
                    watchedStreams[event.data.fd]?.writable()
                }
            }
            handler.tick(now: MonotonicClock.now())
            if nextUploadExpiry != nil { expireUploads(now: MonotonicClock.now()) }
            if !writing.isEmpty { expireWrites(now: MonotonicClock.now()) }
            expireSlowHeaders(now: MonotonicClock.now())
            // A fan-out can take a while: what was posted meanwhile (above all the answer to the mutation that
            // caused it) goes out with this MHD_run, before the fan-out's own answers are sent.
            if !toSend.isEmpty { runTasks() }
            runLibrary(daemon)
            // The connection of such an answer closes (`Connection: close`) on MHD's next pass: its client, waiting
            // for the end of the answer, is not kept waiting for the fan-out either.
            if !toSend.isEmpty { runLibrary(daemon) }
            sendDirectAnswers()
            handBack(daemon)
            if !newUploads.isEmpty { watchUploads() }
            handler.loopDidRun()
        }
        // A stream still suspended (its client took too long over its last bytes) is cut and let go first:
        // libmicrohttpd aborts the process when it is stopped with a connection suspended.
        for stream in watchedStreams.values { stream.cut() }
        runLibrary(daemon)
        MHD_stop_daemon(daemon)
        self.daemon = nil
        // The requests the stop ended (an upload still arriving: `444`) were logged inside `MHD_stop_daemon`, after
        // the loop's last turn: their lines go out now, or they never would.
        handler.loopDidRun()
    }

    /// `MHD_run`, marked as such: MHD calls the handlers from inside it.
    func runLibrary(_ daemon: OpaquePointer) {
        insideLibrary = true
        MHD_run(daemon)
        insideLibrary = false
    }

    private func runTasks() {
        // Swapped, not copied out: the queue gets back the last turn's array, empty with its room, so that posting
        // a group commit's answers does not grow a new array from nothing on every turn.
        tasks.withLock { swap(&$0, &runningTasks) }
        for task in runningTasks { task() }
        runningTasks.removeAll(keepingCapacity: true)
    }

    private func waitTimeout(now: Int64) -> Int32 {
        var timeout: Int64 = 1000
        var daemonTimeout: UInt64 = 0
        if let daemon, MHD_get_timeout(daemon, &daemonTimeout) == .YES {
            timeout = min(timeout, Int64(clamping: daemonTimeout))
        }
        if let deadline = handler?.nextDeadline { timeout = min(timeout, max(0, deadline - now)) }
        if let nextUploadExpiry { timeout = min(timeout, max(0, nextUploadExpiry - now)) }
        if let stopDeadline { timeout = min(timeout, 50, now < stopDeadline ? stopDeadline - now : 50) }
        return Int32(timeout)
    }

    /// Runs `task` on the loop thread soon; callable from any thread.
    ///
    /// Only the post that finds the queue empty wakes the loop: the loop takes the whole queue at once after every
    /// wake, so a task added to a queue that is not empty goes with the tasks whose wake is still to come (or was
    /// just read, before the loop took the queue).
    func post(_ task: @escaping @Sendable () -> Void) {
        let wasEmpty = tasks.withLock { queued in
            queued.append(task)
            return queued.count == 1
        }
        guard wasEmpty else { return }
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
    }

    /// Answers a held exchange with a response of its own (loop thread only).
    func answer(_ exchange: Exchange, with response: Response) {
        answer(exchange, with: shared(response, for: exchange))
    }

    /// Answers a held exchange (loop thread only).
    func answer(_ exchange: Exchange, with response: SharedResponse) {
        answer([exchange], with: response)
    }

    /// Answers held exchanges with one response (loop thread only): outside MHD those that may be
    /// (`answerDirectly`), the others through MHD once they are resumed.
    func answer(_ exchanges: [Exchange], with response: SharedResponse) {
        var direct: [Exchange] = []
        direct.reserveCapacity(exchanges.count)
        for exchange in exchanges where exchange.isSuspended {
            exchange.isSuspended = false
            if exchange.answersDirectly, response.isComplete, fits(response, on: exchange) {
                // Its bookkeeping waits until the fan-out's answers are out (`sendDirectAnswers`).
                direct.append(exchange)
                continue
            }
            forget(exchange)
            exchange.pendingResponse = response
            MHD_resume_connection(exchange.connection)
            runAgain = true
        }
        if !direct.isEmpty { answerDirectly(direct, response) }
    }

    /// Watches a held exchange's socket for the client hanging up (`EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`); not
    /// for more input, which a pipelining client may send and MHD reads once the exchange is resumed. (An upload
    /// in progress is watched the same way: `watchUploads`.)
    ///
    /// The registration is one-shot and stays in the loop's epoll set after the answer: answering 10,000 held
    /// polls then costs no `epoll_ctl` at all (removing each had been a tenth of a fan-out's time). A socket
    /// registered already (an earlier poll on the same connection) is re-armed with one `EPOLL_CTL_MOD`; the kernel
    /// drops the registration when MHD closes the socket, and a hang-up reported after the answer finds no
    /// exchange in `watched` and is ignored, once (one-shot).
    func watchHangUp(of exchange: Exchange) {
        let descriptor = chttpd_connection_fd(exchange.connection)
        guard descriptor >= 0, register(hangUpOf: descriptor, events: EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue)
        else { return }
        exchange.watchedDescriptor = descriptor
        watched[descriptor] = exchange
    }

    /// Watches a stream's socket, once, when the stream first waits for events: for the client hanging up, so that
    /// one that leaves is let go at once, not at the next heartbeat or event; and for room after a `send` that the
    /// socket did not take whole (`EventStream.writable`). Edge-triggered, so that the registration lasts while the
    /// stream does without re-arming it for every event (room is then reported only after the socket was full).
    /// False when the socket cannot be watched.
    func watchStream(_ stream: EventStream, on connection: OpaquePointer) -> Bool {
        let descriptor = chttpd_connection_fd(connection)
        let events = EPOLLRDHUP.rawValue | EPOLLOUT.rawValue | EPOLLET.rawValue
        guard descriptor >= 0, register(hangUpOf: descriptor, events: events) else { return false }
        watchedStreams[descriptor] = stream
        return true
    }

    /// Registers a socket on the loop's epoll for `events`; false when it cannot be.
    private func register(hangUpOf descriptor: Int32, events: UInt32) -> Bool {
        var event = epoll_event()
        event.events = events
        event.data.fd = descriptor
        let registered = registeredDescriptors.contains(descriptor)
        guard
            epoll_ctl(loopEpoll, registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, descriptor, &event) == 0
                // A socket closed and its number reused since (MOD: gone), or registered by an earlier poll of
                // the same connection that this loop no longer remembers (ADD: already there).
                || epoll_ctl(loopEpoll, registered ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, descriptor, &event) == 0
        else { return false }
        registeredDescriptors.insert(descriptor)
        return true
    }

    /// Forgets the watch of a held poll or an upload; its one-shot registration stays (see `watchHangUp(of:)`).
    func unwatch(_ exchange: Exchange) {
        guard let descriptor = exchange.watchedDescriptor else { return }
        exchange.watchedDescriptor = nil
        // The socket's number may name another held exchange by now (this one was forgotten late).
        if watched[descriptor] === exchange { watched[descriptor] = nil }
    }

    /// Forgets an exchange that is no longer held.
    func forget(_ exchange: Exchange) {
        suspended[ObjectIdentifier(exchange)] = nil
        unwatch(exchange)
    }

    /// A watched socket reported hang-up: a held poll is let go and its connection closed unanswered, so that MHD
    /// frees the connection and its descriptor at once; a held mutation is left to its commit, which answers soon.
    private func hungUp(_ descriptor: Int32) {
        // A stream's entry may be stale (the stream ended and the number was reused): a closed stream ignores it.
        if watched[descriptor] == nil, let stream = watchedStreams.removeValue(forKey: descriptor) {
            stream.cut()
            return
        }
        guard let exchange = watched[descriptor], let handler else { return }
        unwatch(exchange)
        if exchange.awaitsBody { return uploadHungUp(exchange) }
        guard exchange.isSuspended, handler.clientLeft(exchange) else { return }
        // Closed without an answer, as nginx closes a long request whose client gave up: a client that only
        // half-closed its side (shut down writing) looks the same here, and an answer it may still read would be
        // one no status fits (the poll did not run its course).
        closeUnanswered(exchange, logging: .clientClosedRequest)
    }

    /// Lets a held exchange go: MHD takes it back and closes its connection, sending nothing; the log says
    /// `status` (loop thread only).
    private func closeUnanswered(_ exchange: Exchange, logging status: HTTPStatus) {
        exchange.isSuspended = false
        exchange.answersDirectly = false
        exchange.closesUnanswered = status
        forget(exchange)
        MHD_resume_connection(exchange.connection)
        runAgain = true
    }

    /// Resumes a connection an event stream suspended in its content reader (loop thread only).
    func resumeStream(_ connection: OpaquePointer) {
        MHD_resume_connection(connection)
        runAgain = true
    }

    /// A stream was cut: its content reader ends the response with an error the next time MHD calls it, and MHD
    /// closes the connection then. It must also let go of it at once.
    ///
    /// libmicrohttpd 0.9.75 (epoll mode) closes such a connection inside its idle handler (shutting the socket
    /// down) and frees it, closing the socket, only the next time it visits it. A pass visits the connections
    /// with events, every connection with a timeout of its own, and those with the daemon's timeout from the
    /// least recently active one up to the first that is still open. The stream's connection has no event left
    /// (it left MHD's epoll set when it was suspended) and its resume made it the most recently active: behind any
    /// older open connection on the loop (an idle keep-alive connection, such as a cache's connections to the
    /// origin) it waited until that one timed out. After a benchmark run through nginx, about half of 10,000 cut
    /// streams (those on the loop holding nginx's idle connections) kept their sockets for 120 s.
    ///
    /// So a cut stream's connection gets a timeout of its own (`closingTimeout`): MHD visits it on every pass,
    /// closes it on the pass that resumes it (the visit of the timeouts comes first) and frees it in the same
    /// pass (the visit of the resumed connections comes after). The timeout also bounds how long MHD goes on
    /// writing what it had taken before the cut to a client that reads nothing.
    ///
    /// Outside `MHD_run` only: MHD moves the connection between the lists its passes walk.
    func cutStream(_ connection: OpaquePointer) {
        assert(!insideLibrary, "a stream is cut outside libmicrohttpd's callbacks")
        _ = chttpd_set_connection_timeout(connection, closingTimeout)
    }

    /// Seconds a connection being let go (a cut stream, an upload whose client hung up or timed out) may go
    /// without activity: any value but the daemon's (`idleTimeout`), which would leave the connection in the list
    /// MHD walks only up to the first open connection.
    var closingTimeout: UInt32 { options.idleTimeout == 1 ? 2 : 1 }

    /// The grace period is over and requests are still held: those whose records never reached the journal get
    /// `503` with `Retry-After` (and their records never will), so that no client is left with a reset
    /// connection; those whose records did are left to their outcome (`awaitSubmitted`).
    private func answerSuspendedOnStop() {
        guard let handler else { return }
        let abandoned = suspended.values.filter { $0.commit.abandon() }
        guard !abandoned.isEmpty else { return }
        let response = handler.response(to: .stopped)
        for exchange in abandoned { answer(exchange, with: response) }
    }

    /// How long after the grace period a stop waits for mutations whose records are in the journal: they take
    /// effect whatever happens (now, or when the journal is replayed; with PostgreSQL, if their commit reached
    /// it), so only their outcome may answer them.
    static let submittedPatience: Int64 = 5000

    /// Whether held mutations whose records are in the journal are still awaited; past `submittedPatience` they
    /// are let go, their connections closed unanswered (logged `444`): their outcome is unknown to the client, as
    /// after a crash, where a `503` would tell it to retry a mutation that took effect. A connection is let go
    /// through MHD, which refuses to stop with one suspended.
    private func awaitSubmitted(now: Int64) -> Bool {
        guard let stopDeadline else { return false }
        let waiting = suspended.values.filter { $0.commit.isSubmitted }
        guard !waiting.isEmpty else { return false }
        guard now >= stopDeadline + Self.submittedPatience else { return true }
        handler?.stoppedWaiting(forSubmitted: waiting.count)
        for exchange in waiting { closeUnanswered(exchange, logging: .closedWithoutAnswer) }
        return true
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
        _ version: UnsafePointer<CChar>?, _ uploadSize: UnsafeMutablePointer<Int>,
        _ context: UnsafeMutablePointer<UnsafeMutableRawPointer?>, _ upload: UnsafePointer<CChar>?
    ) -> MHD_Result {
        guard let handler else { return .NO }
        guard let opaque = context.pointee else {
            inFlight += 1
            record(of: connection)?.requests &+= 1
            if mayAnswerQuickly(connection, method) {
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
            // and no `Expect`, screening queues nothing (a refusal is kept and answered below).
            exchange = start(connection, method, url, version, context)
            guard headersArrived(exchange, handler) == .YES else { return .NO }
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
            return finish(exchange, pending)
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
        switch handler.handle(exchange) {
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
    private func mayAnswerQuickly(_ connection: OpaquePointer, _ method: UnsafePointer<CChar>) -> Bool {
        guard
            (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) && stopDeadline == nil
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
        return hosts == 1 && tags <= 1 && misread == 0
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
            // Reserved as it comes (`BodyBudget`): a client that announces a body and stalls holds none of it.
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

    private func respond(_ exchange: Exchange, _ response: Response) -> MHD_Result {
        finish(exchange, shared(response, for: exchange))
    }

    /// The libmicrohttpd response for `response` with the exchange's own headers: the shared one when the response
    /// is shared (`ResponseShare`) and those headers are the same for every request (none, or `*`'s CORS headers,
    /// added once); else one of its own.
    private func shared(_ response: Response, for exchange: Exchange) -> SharedResponse {
        if let share = response.share, exchange.extraHeadersAreTheSameForAll {
            return share.shared(response, adding: exchange.extraHeaders)
        }
        var response = response
        response.addHeaders(exchange.extraHeaders)
        return SharedResponse(response)
    }

    /// Queues the response. When it cannot go as it is, the failure is logged and counted and another answer goes
    /// instead, so that a client never waits for an answer that will not come: `431` when the request's headers
    /// leave no room for the response's in the connection's memory (`answerHeadersTooLarge`); a bare `500` without
    /// extra headers when MHD refused the response otherwise; if even that fails the connection is closed.
    private func finish(_ exchange: Exchange, _ response: SharedResponse) -> MHD_Result {
        // The body has served its purpose once the answer is decided: its budget is free for the next request.
        releaseBody(of: exchange)
        let fits = fits(response, on: exchange)
        if response.isComplete, fits, response.queue(on: exchange.connection) {
            handler?.didRespond(exchange, status: response.status)
            return .YES
        }
        let (fallback, result) = response.isComplete && !fits ? answerHeadersTooLarge(exchange) : answerBare(exchange)
        handler?.responseFailed(exchange, status: response.status, fits: fits, fallback: fallback)
        if let fallback { handler?.didRespond(exchange, status: fallback) }
        return result
    }

    /// Answers `431` (the handler's answer to `.headersTooLarge`, without the exchange's extra headers): through MHD
    /// when it fits; else, with `Connection: close`, written on the socket outside MHD, whose side of the
    /// connection then closes (`.NO`). Without that, headers just short of filling the connection's memory (which
    /// MHD answers `431` itself) would leave no room even for a bare answer, and the client would get none.
    private func answerHeadersTooLarge(_ exchange: Exchange) -> (status: HTTPStatus?, result: MHD_Result) {
        guard let handler else { return (nil, .NO) }
        let refusal = handler.response(to: .headersTooLarge(limit: options.connectionMemory))
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
        response.headers.append(("Connection", "close"))
        let wire = SharedResponse.wire(of: response, includingBody: includingBody)
        let socket = chttpd_connection_fd(connection)
        guard socket >= 0 else { return false }
        let sent = wire.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        return sent == wire.count
    }

    /// Queues a bare `500`; `.NO` (the connection closes) when even that is refused.
    private func answerBare(_ exchange: Exchange) -> (status: HTTPStatus?, result: MHD_Result) {
        let fallback = SharedResponse.bare(.internalServerError)
        let queued = fallback.isComplete && fallback.queue(on: exchange.connection)
        return queued ? (fallback.status, .YES) : (nil, .NO)
    }

    /// Whether the response's headers fit in what is left of the connection's memory pool next to the request:
    /// MHD accepts a response whose headers do not fit, then closes the connection without a word. The pool holds
    /// the request line and headers as received, a record of `poolBytesPerValue` for each header and query
    /// argument, then the response's header lines and what MHD adds to them; measured on libmicrohttpd 0.9.75.
    private func fits(_ response: SharedResponse, on exchange: Exchange) -> Bool {
        fits(headerBytes: response.headerBytes, status: response.status, on: exchange)
    }

    /// `fits` for a response of `status` whose header lines take `headerBytes`.
    private func fits(headerBytes: Int, status: HTTPStatus, on exchange: Exchange) -> Bool {
        requestPoolBytes(of: exchange) + headerBytes + Self.poolBytesAdded(status) <= options.connectionMemory
    }

    /// `fits` for a request without an exchange, from the request's header bytes as MHD counted them.
    private func fits(_ response: SharedResponse, on connection: OpaquePointer) -> Bool {
        let headerBytes = Int(chttpd_request_header_size(connection))
        let values =
            Int(MHD_get_connection_values(connection, .HEADER_KIND, nil, nil))
            + Int(MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, nil, nil))
        return headerBytes > 0
            && headerBytes + values * Self.poolBytesPerValue + response.headerBytes
                + Self.poolBytesAdded(response.status) <= options.connectionMemory
    }

    /// The pool bytes the request takes (worked out once per exchange: a fan-out asks for each of its answers).
    private func requestPoolBytes(of exchange: Exchange) -> Int {
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

    private static let accessHandler: MHD_AccessHandlerCallback = {
        server, connection, url, method, version, upload, uploadSize, context in
        guard let server, let connection, let url, let method, let uploadSize, let context else { return .NO }
        return Unmanaged<HTTPServer>.fromOpaque(server).takeUnretainedValue()
            .access(connection, url, method, version, uploadSize, context, upload)
    }

    /// A connection MHD starts or closes: its record (`HTTPServer+SlowHeaders.swift`) is made or let go; one this
    /// loop hands back (`handBack`) starts with the bytes its client had sent before, which `mayAnswerDirectly`
    /// needs.
    private static let connectionNotice: MHD_NotifyConnectionCallback = { opaqueServer, connection, context, code in
        guard let opaqueServer, let connection, let context else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(opaqueServer).takeUnretainedValue()
        // `MHD_CONNECTION_NOTIFY_STARTED` (0) and `_CLOSED` (1): the constants do not import.
        switch code.rawValue {
        case 0: server.connectionStarted(connection, context)
        case 1: server.connectionClosed(context)
        default: break
        }
    }

    private static let completedHandler: MHD_RequestCompletedCallback = { opaqueServer, _, context, code in
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
        guard exchange.pendingResponse != nil else { return nil }
        return code.rawValue == 3 ? .closedWithoutAnswer : .clientClosedRequest
    }

    /// Keeps paths and query arguments as they came, so that the router splits the path before decoding each
    /// segment (an item id may contain an encoded `/`).
    private static let identityUnescape: chttpd_unescape_callback = { _, _, text in
        text.map { strlen($0) } ?? 0
    }
}
