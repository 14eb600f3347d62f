import Model

/// A committed write: the version it made and the changeset it produced, the same one the feed hands every
/// follower. A follower's feed brings this changeset too, so a `LiveCollection` that follows the collection is
/// updated by its feed, not by this value.
public struct WriteResult: Hashable, Sendable {
    /// The collection's (or view's) version after the write.
    public var version: Version
    /// The changes, from the version before to `version` (empty when the write changed nothing).
    public var changes: Changeset
    /// Whether the write created the collection, view or item (`201`).
    public var created: Bool

    public init(version: Version, changes: Changeset, created: Bool) {
        self.version = version
        self.changes = changes
        self.created = created
    }
}
