/// Changesets from a change log: what `apply` returns and what `changes(since:)` coalesces.
enum Coalescing {
    /// How a changeset was built: by following the log, or by the full diff it falls back to.
    enum Route: Equatable, Sendable {
        case log
        case fullDiff
    }

    /// Told the route of every changeset `changeset(for:in:from:to:)` builds in this task; nil outside tests. A
    /// task-local rather than a counter, so that tests running in parallel each see only their own changesets.
    @TaskLocal static var routeObserver: (@Sendable (Route) -> Void)?

    /// The changeset from the state before `log` to `store`, the state after it: straight from a single item
    /// change (`SingleChange`), from the log when it is cheap to follow (`LogDelta`), otherwise by rebuilding the
    /// old state and diffing in full.
    /// - Complexity: proportional to what the log touched, up to O(n log n).
    static func changeset(
        for log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset {
        if let single = SingleChange.changeset(for: log, in: store, from: from, to: to) {
            routeObserver?(.log)
            return single
        }
        if let delta = LogDelta.delta(for: log, in: store) {
            routeObserver?(.log)
            return assembleChangeset(delta, new: store, from: from, to: to)
        }
        routeObserver?(.fullDiff)
        return fullChangeset(for: log, in: store, from: from, to: to)
    }

    /// The same by a full diff of the old state, rebuilt by undoing the log on a copy of the store.
    /// - Complexity: O(n log n + k) for k changes.
    static func fullChangeset(
        for log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset {
        var old = store
        for change in log.reversed() { old.undo(change) }
        let new = store.snapshot()
        guard let delta = try? FullDiff.delta(from: old.snapshot(), to: new) else {
            preconditionFailure("a store holds invalid or repeated ids")
        }
        return assembleChangeset(delta, new: SnapshotSource(sections: new), from: from, to: to)
    }
}
