/// The reason of the last failure of something a loop keeps trying (a connection to PostgreSQL, a transaction), so
/// that each reason is logged once and the same one again only at `debug`: an operator sees why (a password
/// changed, connection slots used up, the database's disk full), not a line per try or only that it failed.
struct RepeatedFailure {
    private var last: String?

    /// Whether `error`'s reason differs from the one of the failure before (true for the first).
    mutating func isNewReason(_ error: StorageError) -> Bool {
        let reason = "\(error)"
        defer { last = reason }
        return reason != last
    }

    /// Forgets the last reason: the thing succeeded.
    mutating func reset() { last = nil }
}
