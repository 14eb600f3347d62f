import Glibc
import Model
import Synchronization

/// Starting and stopping the server: configuration, file limits, signals, the loop. Kept out of `main.swift`
/// so that nothing here is main-actor isolated (STYLE.md's signal trap).
enum Lifecycle {
    static func run(arguments: [String], environment: [String: String]) -> Int32 {
        // The log's last lines are written before the process ends.
        defer { LogWriter.standardError.close() }
        var config: Config
        do throws(Config.UsageError) {
            switch try Config.parse(arguments: arguments, environment: environment) {
            case .serve(let parsed): config = parsed
            case .print(let text):
                print(text)
                return 0
            }
        } catch {
            writeToStandardError("ChangeServer: \(error)\nRun 'ChangeServer --help' for the options.\n")
            return 2
        }
        let logger = Logger(level: config.logLevel)
        signal(SIGPIPE, SIG_IGN)
        // A journal write past a file-size limit fails with EFBIG (answered 503) instead of killing the process.
        signal(SIGXFSZ, SIG_IGN)
        blockTerminationSignals()
        // Taken from the start: a signal while the server starts (replaying a long journal, waiting for its
        // database) ends it at once; once it serves, a signal drains it.
        let phase = Mutex(Phase.starting)
        startSignalThread {
            let now = phase.withLock { phase in
                defer { if case .starting = phase { phase = .ending } }
                return phase
            }
            switch now {
            // On threads of their own, so that a second signal still ends the process at once meanwhile.
            case .starting: startThread { exit(logging: "stopped by a signal before serving", logger) }
            case .serving(let app): startThread { app.shutDown() }
            case .ending: break
            }
        }
        for link in config.passedOver {
            logger.log(
                .notice,
                "passed over \(link): Kubernetes sets it for a Service of that name (a service link), and it names no "
                    + "port of this server's")
        }
        let budget = CPUBudget.current()
        let loops = config.threads ?? budget.loops
        let why = config.threads == nil ? "\(budget)" : "--threads; \(budget)"
        let fitted = config.fitted(toOpenFiles: raiseOpenFileLimit(), loops: loops)
        config = fitted.config
        if let note = fitted.note { logger.log(.notice, note) }
        let fittedToMemory = config.fitted(toMemory: MemoryLimit.current())
        config = fittedToMemory.config
        if let note = fittedToMemory.note { logger.log(.notice, note) }
        /// Closed when the start fails after it opened: its journal then says the run closed (`RunRecord`), so
        /// that a restart of the machine before the next start renews nothing.
        var opened: App?
        do throws(StartupError) {
            try Listener.check(host: config.host, port: config.port)
            let app = try App.open(config: config, logger: logger)
            opened = app
            var port = config.port
            let perLoop = (config.maxConnections + loops - 1) / loops
            for loop in 0..<loops {
                let listener = try Listener.open(host: config.host, port: port, joining: loop > 0)
                port = listener.port
                let server = try HTTPServer(
                    listener: listener,
                    options: .init(
                        maxBodyBytes: config.maxBodyBytes, connectionLimit: perLoop,
                        idleTimeout: config.idleTimeout, bodyTimeout: config.bodyTimeout,
                        headerTimeout: config.headerTimeout,
                        connectionMemory: config.connectionMemory, perAddressLimit: config.maxConnectionsPerAddress,
                        bodyBudget: app.bodyBudget, responseBudget: app.responseBudget))
                app.add(Worker(app: app, server: server))
            }
            let serves = phase.withLock { phase in
                guard case .starting = phase else { return false }
                // Before the signal thread can see the app: `shutDown` drains only an app that serves.
                app.startServing()
                phase = .serving(app)
                return true
            }
            // A signal came while the server started: the signal's thread ends the process.
            while !serves { sleep(60) }
            logger.log(
                .notice,
                "ChangeServer \(Release.version) listening on \(Listener.address(host: config.host, port: port)) with \(loops) event loop\(loops == 1 ? "" : "s") (\(why))"
            )
            if let warning = config.openAccessWarning { logger.warning(warning) }
            if let disk = app.diskSpace, !disk.allowsWrites {
                logger.warning(
                    "--data-dir has \(disk.freeBytes ?? 0) bytes free, less than the \(disk.reserve) kept for snapshots "
                        + "(--disk-reserve-bytes): writes are refused 503 until there is room")
            }
            let trimmer = MemoryTrimmer(logger: logger)
            let threads = app.workers.dropFirst().map { worker in
                JoinableThread { worker.server.run(handler: worker) }
            }
            if let first = app.workers.first { first.server.run(handler: first) }
            for thread in threads { thread.join() }
            trimmer.stop()
            app.finish()
            logger.log(.notice, "stopped")
            return app.exitStatus
        } catch {
            phase.withLock { $0 = .ending }
            opened?.finish()
            logger.log(.critical, "cannot start: \(error)")
            return 1
        }
    }

    /// Where the server is, for the thread that takes signals: a signal while it starts ends it, one while it
    /// serves drains it, and one while it ends by itself (a start that failed) changes nothing.
    private enum Phase {
        case starting
        case serving(App)
        case ending
    }

    /// Logs `line` and ends the process with status 0 once the log is written, or once `LogWriter.close` gives up:
    /// stderr may be a pipe that nobody reads.
    private static func exit(logging line: String, _ logger: Logger) -> Never {
        logger.log(.notice, line)
        LogWriter.standardError.close()
        _exit(0)
    }

    /// Lets 10,000+ held polls fit: the soft open-files limit goes up to the hard one. Returns the limit in force.
    private static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    private static var terminationSignals: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        // A hang-up (the terminal closed, or an operator's `kill -HUP` meant as a reload) drains as the others do:
        // by default it killed the process at once, held polls unanswered and the last log lines lost. Unless the
        // server was started with it ignored (`nohup`): a blocked signal is kept even when ignored, and `sigwait`
        // would take it, stopping a server that was meant to outlive its terminal.
        if !hangUpIgnoredAtStart { sigaddset(&set, SIGHUP) }
        return set
    }

    /// Whether the process was started with SIGHUP ignored, read before anything blocks it.
    private static let hangUpIgnoredAtStart: Bool = {
        var current = sigaction()
        guard sigaction(SIGHUP, nil, &current) == 0 else { return false }
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
            == unsafeBitCast(SIG_IGN, to: Int.self)
    }()

    /// SIGTERM, SIGINT and SIGHUP are blocked in every thread and taken by `sigwait` on one thread of their own.
    private static func blockTerminationSignals() {
        var set = terminationSignals
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    private static func startSignalThread(_ onSignal: @escaping @Sendable () -> Void) {
        startThread {
            var set = terminationSignals
            var received: Int32 = 0
            sigwait(&set, &received)
            onSignal()
            // A second signal stops at once, saying so in one write (the log's writer may be what is stuck), and
            // only when stderr has room for it: a write into a pipe nobody reads would never return.
            sigwait(&set, &received)
            let line = Array("ChangeServer: a second signal (\(received)): exiting at once, with status 1\n".utf8)
            var standardError = pollfd(fd: 2, events: Int16(POLLOUT), revents: 0)
            if poll(&standardError, 1, 0) == 1 && standardError.revents & Int16(POLLOUT) != 0 {
                _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            }
            _exit(1)
        }
    }
}
