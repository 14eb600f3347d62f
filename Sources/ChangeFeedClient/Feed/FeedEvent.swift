import Model

/// What a feed hands over: a whole snapshot to start from (at the start, and again after the cursor expired),
/// or one changeset from the last version to the next.
public enum FeedEvent: Hashable, Sendable {
    /// The whole content at a version: replace everything shown (`reloadData`, or a diffable snapshot).
    case reset(Snapshot)
    /// One changeset from the version of the event before to `changes.to`, already checked against the
    /// changeset rules that need no content (sorting, distinct coordinates, ids).
    case changes(Changeset)
}

/// A collection's or view's whole content at one version.
public struct Snapshot: Hashable, Sendable {
    /// The collection's or view's name.
    public var name: String
    /// The version this content is at.
    public var version: Version
    /// The sections in order, each with its items in order.
    public var sections: [Section]

    /// A snapshot of `sections` at `version`.
    public init(name: String, version: Version, sections: [Section]) {
        self.name = name
        self.version = version
        self.sections = sections
    }
}
