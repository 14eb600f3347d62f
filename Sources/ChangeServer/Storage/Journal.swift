/// Where mutations are written before they are applied. The commit path appends a mutation's record; once it is
/// durable (as `--fsync` promises) the journal calls back, and only then is the mutation applied and answered:
/// so what clients can see is always durable, and a write that fails changes nothing. Callbacks come in the order
/// of the records, which is the order replay applies them in. The journal knows nothing of HTTP.
protocol Journal: AnyObject, Sendable {
    /// Appends one encoded record; `done` runs once it is durable (`true`) or could not be made so (`false`:
    /// it was dropped from the journal). Throws when the record cannot be taken at all; `done` does not run then.
    func append(_ record: [UInt8], then done: @escaping @Sendable (Bool) -> Void) throws(StorageError)
    /// Makes everything appended durable and runs its callbacks, then returns (at shutdown).
    func flush()
    /// Flushes and stops the journal's threads (after the last append).
    func close()
    /// Whether `done` runs on a thread of the journal's own, outside its locks, one callback at a time in the order
    /// of the records: a light record may then be applied right there (`LaneRouter.hand`), not handed to a lane.
    var callsBackOnItsOwnThread: Bool { get }
    /// Whether the journal can take records now: up or down for a journal on another machine; for a local one,
    /// down while its writes fail, else nil (see the extension).
    var storeState: StoreState? { get }
    /// Whether other servers write to the same journal (PostgreSQL): a cursor or an item may then come from a
    /// server that applied more than this one yet.
    var isShared: Bool { get }
    /// The journal's own lines of `/metrics`, beyond the shared ones.
    func metricsText() -> String
    /// One of this server's records was applied and named a collection that is not there (a shared journal takes
    /// such records: `App.expectWritable`): its rows should not stay in the journal for good.
    func noteMissingCollection(_ name: String)
    /// Another server's record, applied here, moved a view to `source`: a shared journal may owe it a snapshot.
    func remoteRecordMovedView(to source: String)
}

/// Whether the journal can take records now (`/healthz` shows it).
enum StoreState: String, Sendable {
    case up
    case down
}

extension Journal {
    /// The state of a journal on another machine; nil for a local one whose writes succeed.
    var storeState: StoreState? { nil }

    var callsBackOnItsOwnThread: Bool { false }

    var isShared: Bool { false }

    /// The journal's own lines of `/metrics` (Prometheus text), if it has any beyond the shared ones.
    func metricsText() -> String { "" }

    /// A local journal never takes such a record (routes refuse it first), and snapshots compact whatever it holds.
    func noteMissingCollection(_ name: String) {}

    /// Only a shared journal hands in other servers' records.
    func remoteRecordMovedView(to source: String) {}
}
