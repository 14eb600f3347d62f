/// Changesets from a change log: what `apply` returns and what `changes(since:)` coalesces.
enum Coalescing {
    /// The changeset from the state before `log` to `store`, the state after it.
    /// - Complexity: O(n log n).
    static func changeset(
        for log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset {
        var old = store
        for change in log.reversed() { old.undo(change) }
        let source = SnapshotSource(store.snapshot())
        return assembleChangeset(FullDiff.delta(from: old.snapshot(), to: source), new: source, from: from, to: to)
    }
}
