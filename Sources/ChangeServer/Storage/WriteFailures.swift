import Synchronization

/// The file journal's failed writes and syncs, for its log, `/healthz` and `/metrics`. A disk that fails every
/// write (full, gone, read-only) logged a line per failed batch, thousands a second, on a disk that may be the
/// log's too, and `/healthz` said nothing of it. Now a failure is logged at most once a second, the next line
/// counting those in between, and the first write that succeeds after failures says so; meanwhile the journal
/// reads as down.
final class WriteFailures: Sendable {
    private struct State {
        /// When the last failure was logged (monotonic milliseconds).
        var loggedAt: Int64?
        /// Failures since that line, and the mutations they answered `503`.
        var unlogged = 0
        var unloggedMutations = 0
        /// Failures, and mutations answered `503`, since the last write that succeeded.
        var failures = 0
        var refusedMutations = 0
    }

    private let state = Mutex(State())
    /// Whether the last write or sync failed: read by every `/healthz`, and cleared by every pass that succeeds,
    /// without taking the lock.
    private let failing = Atomic<Bool>(false)
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Whether the last write or sync failed (and none succeeded since).
    var isFailing: Bool { failing.load(ordering: .relaxed) }

    /// A write or sync failed (`reason`: strerror's text); `mutations` were answered `503` for it.
    func failed(_ reason: String, mutations: Int) {
        failing.store(true, ordering: .relaxed)
        let now = MonotonicClock.now()
        let line: String? = state.withLock { state in
            state.failures += 1
            state.refusedMutations += mutations
            if let loggedAt = state.loggedAt, now - loggedAt < 1000 {
                state.unlogged += 1
                state.unloggedMutations += mutations
                return nil
            }
            defer { (state.loggedAt, state.unlogged, state.unloggedMutations) = (now, 0, 0) }
            let between =
                state.unlogged == 0
                ? ""
                : " (\(state.unlogged) more failures, \(state.unloggedMutations) mutations, since the last line)"
            return "journal write or fsync failed: \(reason); \(mutations) mutations answered 503" + between
        }
        if let line { logger.error(line) }
    }

    /// A write and its sync succeeded.
    func succeeded() {
        guard failing.load(ordering: .relaxed) else { return }
        failing.store(false, ordering: .relaxed)
        let (failures, mutations) = state.withLock { state in
            defer { (state.loggedAt, state.unlogged, state.unloggedMutations) = (nil, 0, 0) }
            defer { (state.failures, state.refusedMutations) = (0, 0) }
            return (state.failures, state.refusedMutations)
        }
        logger.log(
            .notice, "journal writes succeed again, after \(failures) failures that answered \(mutations) mutations 503"
        )
    }
}
