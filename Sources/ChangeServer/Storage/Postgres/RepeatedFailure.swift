/// The reason of the last failure of something a loop keeps trying (a connection to PostgreSQL, a transaction), so
/// that each reason is logged when it changes or a minute after it was last logged, and otherwise only at `debug`:
/// an operator sees why (a password changed, connection slots used up, the database's disk full), not a line per
/// try, nor a line per flip of a store that goes down and up again every few seconds.
struct RepeatedFailure {
    private var last: String?
    private var loggedAt: Int64 = 0

    /// Whether a failure for `error` is to be logged: its reason differs from the last one's, or that one was
    /// logged a minute ago or more.
    mutating func isNewReason(_ error: StorageError, now: Int64 = MonotonicClock.now()) -> Bool {
        let reason = "\(error)"
        guard reason != last || now - loggedAt >= 60_000 else { return false }
        last = reason
        loggedAt = now
        return true
    }

    /// Forgets the last reason: the thing succeeded.
    mutating func reset() { last = nil }
}
