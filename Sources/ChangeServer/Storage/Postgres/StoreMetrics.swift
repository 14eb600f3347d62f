import Synchronization

/// What `/metrics` shows of the PostgreSQL backend: whether it is reachable, how long its commits take, how
/// often it reconnected, how many records of other servers were applied, how its snapshots fare, and how many view
/// moves did not wait for the read they wait for.
final class StoreMetrics: Sendable {
    private struct State {
        var isUp = false
        /// Set while the follower's wait for the database went past `--postgres-timeout` and it has not read on a
        /// new connection since (`PostgresJournal.watchFollower`): the store is down then too.
        var followerStalled = false
        /// Set when a transaction failed on a connection that works (the database refused it: its disk full, say),
        /// until one commits.
        var commitsFailing = false
        /// Whether writes are tried: the database reachable, and the follower reading.
        var triesWrites: Bool { isUp && !followerStalled }
        /// Whether the store takes writes: they are tried, and the last one tried committed.
        var takesWrites: Bool { triesWrites && !commitsFailing }
        var commitFailures = 0
        var reconnects = 0
        var remoteRecords = 0
        var catchUps = 0
        var snapshots = 0
        var snapshotFailures = 0
        var movesUnread = 0
        var buckets = [Int](repeating: 0, count: StoreMetrics.bounds.count)
        var sum = 0.0
        var count = 0
    }

    static let bounds: [Double] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

    private let state = Mutex(State())

    /// Whether appends are sent to the database at all (else they are refused at once): not while it cannot be
    /// connected to or the follower is stalled, but still while its commits fail, or nothing would find them
    /// succeeding again.
    var triesWrites: Bool { state.withLock { $0.triesWrites } }

    /// Whether the store takes writes, as `/healthz` and `changeserver_store_up` show it.
    var takesWrites: Bool { state.withLock { $0.takesWrites } }

    /// Whether the last transaction failed on a working connection (`setCommitsFailing`).
    var commitsFail: Bool { state.withLock { $0.commitsFailing } }

    /// Records whether the database is reachable; returns whether that changed.
    func setUp(_ isUp: Bool) -> Bool {
        state.withLock { state in
            defer { state.isUp = isUp }
            return state.isUp != isUp
        }
    }

    /// Records whether the follower is stalled; returns whether that changed.
    func setFollowerStalled(_ stalled: Bool) -> Bool {
        state.withLock { state in
            defer { state.followerStalled = stalled }
            return state.followerStalled != stalled
        }
    }

    /// Records whether the last transaction failed on a working connection; returns whether that changed.
    func setCommitsFailing(_ failing: Bool) -> Bool {
        state.withLock { state in
            defer { state.commitsFailing = failing }
            return state.commitsFailing != failing
        }
    }

    func commitFailed() { state.withLock { $0.commitFailures += 1 } }
    func reconnected() { state.withLock { $0.reconnects += 1 } }
    func appliedRemote(_ count: Int) { state.withLock { $0.remoteRecords += count } }
    func caughtUp() { state.withLock { $0.catchUps += 1 } }
    func snapshotStored() { state.withLock { $0.snapshots += 1 } }
    func snapshotFailed() { state.withLock { $0.snapshotFailures += 1 } }
    func moveHandedOnUnread() { state.withLock { $0.movesUnread += 1 } }

    /// A group-commit transaction took `seconds` (from `BEGIN` to the answer of `COMMIT`).
    func committed(seconds: Double) {
        state.withLock { state in
            for (index, bound) in Self.bounds.enumerated() where seconds <= bound { state.buckets[index] += 1 }
            state.sum += seconds
            state.count += 1
        }
    }

    /// `housekeepingJobs`: the housekeeper's backlog (`Housekeeper.backlog`).
    func render(housekeepingJobs: Int) -> String {
        let snapshot = state.withLock { $0 }
        var lines: [String] = []
        func metric(_ name: String, _ type: String, _ help: String) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
        }
        metric(
            "changeserver_store_up", "gauge",
            "1 while PostgreSQL is reachable for writes, the follower reads from it and the last transaction "
                + "committed, else 0.")
        lines.append("changeserver_store_up \(snapshot.takesWrites ? 1 : 0)")
        metric(
            "changeserver_store_commit_failures_total", "counter",
            "Group-commit transactions PostgreSQL refused on a working connection (its disk full, say).")
        lines.append("changeserver_store_commit_failures_total \(snapshot.commitFailures)")
        metric(
            "changeserver_store_reconnects_total", "counter",
            "Connections to PostgreSQL made again after a loss (the writer's and the follower's).")
        lines.append("changeserver_store_reconnects_total \(snapshot.reconnects)")
        metric("changeserver_store_remote_records_total", "counter", "Records committed by other servers, applied.")
        lines.append("changeserver_store_remote_records_total \(snapshot.remoteRecords)")
        metric("changeserver_store_catch_ups_total", "counter", "Periodic reads of every collection's last sequence.")
        lines.append("changeserver_store_catch_ups_total \(snapshot.catchUps)")
        metric("changeserver_store_snapshots_total", "counter", "Snapshots of collections stored in PostgreSQL.")
        lines.append("changeserver_store_snapshots_total \(snapshot.snapshots)")
        metric(
            "changeserver_store_snapshot_failures_total", "counter",
            "Snapshots that could not be stored (their records are kept; tried again later).")
        lines.append("changeserver_store_snapshot_failures_total \(snapshot.snapshotFailures)")
        metric(
            "changeserver_store_moves_unread_total", "counter",
            "Batches handed on after 2 s without the records they wait for (a view's move, its old source).")
        lines.append("changeserver_store_moves_unread_total \(snapshot.movesUnread)")
        metric(
            "changeserver_store_housekeeping_jobs", "gauge",
            "Snapshots and purges queued or being written, one at a time, on the housekeeper's connection.")
        lines.append("changeserver_store_housekeeping_jobs \(housekeepingJobs)")
        metric("changeserver_store_commit_seconds", "histogram", "Latency of group-commit transactions.")
        for (index, bound) in Self.bounds.enumerated() {
            lines.append("changeserver_store_commit_seconds_bucket{le=\"\(bound)\"} \(snapshot.buckets[index])")
        }
        lines.append("changeserver_store_commit_seconds_bucket{le=\"+Inf\"} \(snapshot.count)")
        lines.append("changeserver_store_commit_seconds_sum \(snapshot.sum)")
        lines.append("changeserver_store_commit_seconds_count \(snapshot.count)")
        return lines.joined(separator: "\n") + "\n"
    }
}
