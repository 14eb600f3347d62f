/// Changesets from a change log: what `apply` returns and what `changes(since:)` coalesces.
enum Coalescing {
    /// The changeset from the state before `log` to `store`, the state after it: from the log when it is cheap
    /// to follow (`LogDelta`), otherwise by rebuilding the old state and diffing in full.
    /// - Complexity: proportional to what the log touched, up to O(n log n).
    static func changeset(
        for log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset {
        if let delta = LogDelta.delta(for: log, in: store) {
            return assembleChangeset(delta, new: store, from: from, to: to)
        }
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
