extension Changeset {
    /// The changeset that takes `old` to `new`, obeying the rules of `docs/changesets.md#the-rules`.
    /// - Throws: `invalid_id` or `duplicate_id` when `new` has an invalid or repeated id.
    /// - Precondition: `old` has valid, unique ids.
    /// - Complexity: O(n log n) with hashing on ids, n the size of both snapshots.
    public static func diff(from old: [Section], to new: [Section], versions: (from: Version, to: Version))
        throws(ModelError) -> Changeset
    {
        let delta = try FullDiff.delta(from: old, to: new)
        return assembleChangeset(delta, new: SnapshotSource(sections: new), from: versions.from, to: versions.to)
    }
}
