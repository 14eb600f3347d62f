import Model

/// What a feed hands over: a whole snapshot to start from (at the start, and again after the cursor expired),
/// one changeset from the last version to the next, or word that there is nothing to show.
public enum FeedEvent: Hashable, Sendable {
    /// The whole content at a version: replace everything shown (`reloadData`, or a diffable snapshot).
    case reset(Snapshot)
    /// One changeset from the version of the event before to `changes.to`. From a feed, it was checked against
    /// the changeset rules that need no content (sorting, distinct coordinates, ids) when decoded;
    /// `LiveCollection.apply` checks those again for an event made otherwise.
    case changes(Changeset)
    /// The collection or view does not exist now: it was deleted (`410 collection_deleted`), or a reset found
    /// none (`404`: not created yet, or a name that is wrong). Show nothing. The feed goes on, asking again every
    /// `FeedClient.missingRetry`, and its next event is a reset once the collection or view exists (again).
    case missing
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

extension FeedEvent {
    /// Decodes the body of a `200` feed answer received by other means than `FeedClient` (a stream, a cache, a
    /// test): a reset, or a changeset checked as `FeedClient` checks it. An empty poll answer is an empty
    /// changeset from a version to itself.
    /// - Throws: `FeedError.invalidAnswer` or `FeedError.invalidChangeset`.
    /// - Complexity: O(n log n) for n bytes.
    public init(decoding body: [UInt8], kind: FeedClient.Kind = .collection) throws(FeedError) {
        switch try WireDecoding.feedAnswer(body, kind: kind) {
        case .reset(let snapshot, _): self = .reset(snapshot)
        case .changes(let changeset, _): self = .changes(changeset)
        }
    }
}
