import Synchronization

/// One kind of the file journal's failures (its writes and syncs, or with `--fsync interval` its syncs alone), for
/// its log, `/healthz` and `/metrics`. A disk that fails every write (full, gone, read-only) logged a line per
/// failed batch, thousands a second, on a disk that may be the log's too, and `/healthz` said nothing of it. Now
/// failures are logged at most once a second, each line counting those since the last, and the word that they
/// succeed again follows each failure line (a disk that fails every other write logs two lines a second, not two
/// per write, and the log never ends on a failure while writes succeed); meanwhile the journal reads as down.
final class WriteFailures: Sendable {
    private struct State {
        /// When a failure, and when a recovery, was last logged (monotonic milliseconds).
        var failureLoggedAt: Int64?
        var recoveryLoggedAt: Int64?
        /// Whether a failure line came after the last recovery line.
        var failureLoggedSinceRecovery = false
        /// Failures not logged since the last line (of either kind), and the mutations they answered `503`.
        var unlogged = 0
        var unloggedMutations = 0
        /// Failures, and mutations answered `503`, since the last recovery line.
        var failures = 0
        var refusedMutations = 0
    }

    /// What fails, for the log: "journal write or fsync", say.
    private let what: String
    /// Writes a line of the log (the server's logger; a test's list).
    private let log: @Sendable (LogLevel, String) -> Void
    private let state = Mutex(State())
    /// Whether the last try failed: read without the lock (by every `/healthz`, and by every success, which has
    /// nothing to do while it is false); set and cleared under it.
    private let failing = Atomic<Bool>(false)

    init(_ what: String, log: @escaping @Sendable (LogLevel, String) -> Void) {
        self.what = what
        self.log = log
    }

    /// Whether the last try failed (and none succeeded since).
    var isFailing: Bool { failing.load(ordering: .relaxed) }

    /// A try failed (`reason`: strerror's text); `mutations` were answered `503` for it.
    func failed(_ reason: String, mutations: Int) {
        let now = MonotonicClock.now()
        let line: String? = state.withLock { state in
            failing.store(true, ordering: .relaxed)
            state.failures += 1
            state.refusedMutations += mutations
            if let loggedAt = state.failureLoggedAt, now - loggedAt < 1000 {
                state.unlogged += 1
                state.unloggedMutations += mutations
                return nil
            }
            defer { (state.failureLoggedAt, state.unlogged, state.unloggedMutations) = (now, 0, 0) }
            state.failureLoggedSinceRecovery = true
            let between =
                state.unlogged == 0
                ? "" : " (\(state.unlogged) more failures, \(state.unloggedMutations) mutations, since the last line)"
            return "\(what) failed: \(reason); \(mutations) mutations answered 503" + between
        }
        if let line { log(.error, line) }
    }

    /// A try succeeded.
    func succeeded() {
        guard failing.load(ordering: .relaxed) else { return }
        let now = MonotonicClock.now()
        let line: String? = state.withLock { state in
            guard failing.load(ordering: .relaxed) else { return nil }
            failing.store(false, ordering: .relaxed)
            // Held back only when no failure was logged since the last recovery line: the log never ends on a
            // failure while the journal is well.
            if let loggedAt = state.recoveryLoggedAt, now - loggedAt < 1000, !state.failureLoggedSinceRecovery {
                return nil
            }
            // The failures not logged on a line of their own are counted on this one: a later failure line must
            // not count them again.
            defer {
                (state.recoveryLoggedAt, state.failures, state.refusedMutations) = (now, 0, 0)
                (state.unlogged, state.unloggedMutations) = (0, 0)
            }
            state.failureLoggedSinceRecovery = false
            return "\(what) succeeds again, after \(state.failures) failures that answered \(state.refusedMutations) "
                + "mutations 503"
        }
        if let line { log(.notice, line) }
    }
}
