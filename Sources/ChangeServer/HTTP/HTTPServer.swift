import CHTTPD
import Glibc
import Synchronization

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
        /// Seconds a connection with no activity is kept (`--idle-timeout`; held polls are suspended and not timed by
        /// MHD).
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
        var bodyBudget: MemoryBudget
        /// Memory for large answers until they are sent, shared by all loops (`ResponseBytes`).
        var responseBudget: MemoryBudget
    }

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
    /// Whether the listener is closed (`quiesce`): the stop has begun, and every answer closes its connection
    /// (`shared(_:for:budget:)`).
    private(set) var isQuiesced = false
    /// While stopping: when the last request arrived (or the stop began), in monotonic milliseconds.
    var lastArrival: Int64 = 0
    /// How long a stopping loop waits with no request in flight and none arriving before it closes its connections.
    static let stopQuiet: Int64 = 200
    /// The most connections a stop takes from its listener's backlog: the backlog's own length.
    static let backlogTaken = 4096
    /// How long a stop's listener waits, once its backlog is empty, for the handshakes under way (milliseconds):
    /// on loopback they complete within microseconds.
    static let handshakeWait: Int32 = 1
    /// During a stop, the loop runs at least until then (monotonic milliseconds): for the connections let go last
    /// to be closed.
    private var continueUntil: Int64 = 0
    /// Requests begun and not completed: what a stop waits for (idle keep-alive connections are just closed).
    var inFlight = 0
    /// Exchanges suspended now: a stop must resume every one before `MHD_stop_daemon`, which aborts otherwise.
    var suspended: [ObjectIdentifier: Exchange] = [:]
    /// Held polls by their socket, watched for hang-up on the loop's epoll: MHD never reads a suspended
    /// connection, so without this a client that left would pin its descriptor until the poll's timeout. Uploads
    /// still arriving are watched here too (`watchUploads`).
    var watched: [Int32: Exchange] = [:]
    /// Event streams watched for hang-up, by socket.
    var watchedStreams: [Int32: EventStream] = [:]
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
            Self.identityUnescape, Self.connectionNotice, Unmanaged.passUnretained(self).toOpaque(), Self.targetArrived,
            Unmanaged.passUnretained(self).toOpaque())
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
                // Not the moment the last request is done: a keep-alive client sends its next one as it reads
                // the answer, and a connection closed then took a request without a word. It goes once no request
                // came for `stopQuiet` (each is answered `503` with `Connection: close`, so its client moves to a
                // new connection, which the closed listener refuses plainly); at once with no connection left.
                let isQuiet = inFlight == 0 && (connectionRecords.isEmpty || now >= lastArrival + Self.stopQuiet)
                if isQuiet || now >= max(stopDeadline + 500, continueUntil) { break }
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

    /// Answers a held exchange with a response of its own (loop thread only), a `GET`'s counted as `counted` says.
    func answer(_ exchange: Exchange, with response: Response) {
        answer(exchange, with: counted(response, for: exchange))
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
            if exchange.answersDirectly, !response.closesConnection, response.isComplete, fits(response, on: exchange) {
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

    /// Resumes a held exchange to be answered by what `result` returns when libmicrohttpd calls the handler again
    /// (loop thread only), as `handle` would have answered it: an event stream whose first event was made off the
    /// loop. An exchange no longer held (a stop answered it) is left as it is.
    func resume(_ exchange: Exchange, answeringWith result: @escaping () -> HandlerResult) {
        guard exchange.isSuspended else { return }
        exchange.isSuspended = false
        forget(exchange)
        exchange.pendingResult = result
        MHD_resume_connection(exchange.connection)
        runAgain = true
    }

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

    /// Takes the connections the kernel completed on `listener` that the loop has not accepted yet, and gives them
    /// to MHD, which answers their requests (`503 shutting_down`, with `Connection: close`): their clients may have
    /// sent a request already, and closing the listener reset them without a word. Those past the loop's connection
    /// limits MHD closes unread. New connections no longer come (`chttpd_drop_new_connections`), but a handshake
    /// under way when the listener was told so may complete after the last accept (within about a loopback round
    /// trip), and is reset: its client may have sent its request too.
    private func takeBacklog(of listener: Int32, into daemon: OpaquePointer) {
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        var waited = false
        // Bounded: clients that reconnect as fast as they are answered would otherwise keep the loop here.
        for _ in 0..<Self.backlogTaken {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let accepted = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listener, $0, &length)
                }
            }
            guard accepted >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // Once empty, a millisecond at most for the handshakes under way (one in 150 runs of
                // `everyRequestSentWhileStoppingIsAnswered` still met one without it).
                guard !waited else { return }
                waited = true
                var readable = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&readable, 1, Self.handshakeWait) > 0 else { return }
                continue
            }
            _ = fcntl(accepted, F_SETFD, FD_CLOEXEC)
            _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) | O_NONBLOCK)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    MHD_add_connection(daemon, accepted, $0, length)
                }
            }
        }
    }

    /// Stops accepting connections: the first step of a stop, taken as soon as the server refuses new requests
    /// (`503 shutting_down`, with `Connection: close`), so that their clients' new connections are refused
    /// rather than taken and refused again. Callable more than once.
    func quiesce() {
        guard !isQuiesced, let daemon else { return }
        isQuiesced = true
        let listener = MHD_quiesce_daemon(daemon)
        if listener >= 0 {
            // New connections first: one that came between the backlog's last accept and the close was reset
            // (7 runs in 100 of `everyRequestSentWhileStoppingIsAnswered`).
            _ = chttpd_drop_new_connections(listener)
            takeBacklog(of: listener, into: daemon)
            close(listener)
        }
    }

    /// Stops accepting connections (`quiesce`) and ends the loop once its requests are done and no new one came for
    /// `stopQuiet`, or `grace` milliseconds from now at most (longer while mutations in the journal wait for their
    /// outcome, `awaitSubmitted`). Loop thread.
    func stop(grace: Int64) {
        guard stopDeadline == nil, daemon != nil else { return }
        quiesce()
        lastArrival = MonotonicClock.now()
        stopDeadline = lastArrival + grace
        runAgain = true
    }

}
