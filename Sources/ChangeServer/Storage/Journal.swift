/// Where mutations are written before they are applied. The server appends a mutation's record; once it is
/// durable (as `--fsync` promises) the journal calls back, and only then is the mutation applied and answered:
/// so what clients can see is always on disk, and a write that fails changes nothing. Callbacks come in the
/// order of the records, which is the order replay applies them in.
protocol Journal: AnyObject, Sendable {
    /// Appends one encoded record; `done` runs once it is durable (`true`) or could not be made so (`false`:
    /// it was dropped from the journal). Throws `503 storage_unavailable` when the record cannot be written at
    /// all; `done` does not run then.
    func append(_ record: [UInt8], then done: @escaping @Sendable (Bool) -> Void) throws(HTTPError)
    /// Makes everything appended durable and runs its callbacks, then returns (at shutdown).
    func flush()
}
