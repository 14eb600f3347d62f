/// Where mutations are written before they are applied. The server writes a mutation's record, waits until it
/// is durable (as `--fsync` promises), and only then applies it to the collections and answers: so what clients
/// can see is always on disk, and a write that fails changes nothing.
protocol Journal: AnyObject, Sendable {
    /// Writes one encoded record and returns its ticket; `503 storage_unavailable` when it cannot be written
    /// (nothing of it is kept then).
    func write(_ record: [UInt8]) throws(HTTPError) -> UInt64
    /// Whether the record of `ticket` is durable already, so that it can be applied at once.
    func isDurable(_ ticket: UInt64) -> Bool
    /// Calls `done` once the record of `ticket` is durable (`true`), or could not be made so (`false`: it was
    /// dropped from the journal). Callbacks come in ticket order, on a thread of the journal's.
    func whenDurable(_ ticket: UInt64, _ done: @escaping @Sendable (Bool) -> Void)
    /// Makes everything written durable, then returns (at shutdown).
    func flush()
}

/// Keeps nothing: every record is "durable" at once. For tests of the HTTP layer.
final class MemoryJournal: Journal {
    func write(_ record: [UInt8]) throws(HTTPError) -> UInt64 { 0 }
    func isDurable(_ ticket: UInt64) -> Bool { true }
    func whenDurable(_ ticket: UInt64, _ done: @escaping @Sendable (Bool) -> Void) { done(true) }
    func flush() {}
}
