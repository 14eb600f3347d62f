/// A view (API.md, "Views"): a read-only collection derived from a source collection and kept up to date.
///
/// The view's content IS a `VersionedCollection` (`collection`): its versions, kept history, coalesced
/// changesets and binary encoding are a collection's. Beside it the view keeps an order-statistic index of
/// every source item that passes the filter (shown or beyond the limit), keyed by its whole position (section
/// key, sort keys, id) as one byte string, and an index of the sections the content holds. A source change
/// updates the index; the items whose place in the content changed follow from it, with their places before
/// and after, and from those the edits of the content, whose log gives the changeset as an op batch's does
/// (`LiveView+Commit.swift`). A large change, and a new definition, are computed from scratch and diffed in full.
///
/// Invariants between calls: `collection` holds, in order, the first `limit` items of the index grouped into
/// their sections, and exactly the sections that have one of them (the section `"all"` always, without
/// `sectionBy`); `sections` holds those sections' keys.
public struct LiveView: Sendable {
    /// An item that passes the filter: where it goes, and its data.
    struct Member: Sendable {
        var placement: ViewRules.Placement
        var data: JSONData
    }

    /// The view's definition.
    public private(set) var definition: ViewDefinition
    /// The content, with its version and kept history.
    public internal(set) var collection: VersionedCollection
    var rules: ViewRules
    /// Every source item that passes the filter, by id.
    var members: [ExactString: Member] = [:]
    /// The members by order key.
    var index = OrderedIndex()
    /// The sections of the content by section key.
    var sections = OrderedIndex()
    /// The section key of each section of the content, by id.
    var present: [ExactString: [UInt8]] = [:]

    /// Creates the view at `<epoch>.1` with the content `definition` gives on `source` (empty when the source
    /// does not exist).
    /// - Precondition: `epoch` is a valid epoch.
    /// - Complexity: O(n log n) for n source items.
    public init(
        epoch: String, definition: ViewDefinition, source: VersionedCollection?, limits: HistoryLimits = .init()
    ) {
        self.definition = definition
        rules = ViewRules(definition)
        collection = LiveView.uncheckedCollection(epoch: epoch, limits: limits)
        derive(from: source) { collection, content in
            collection = LiveView.uncheckedCollection(epoch: epoch, sections: content, limits: limits)
        }
    }

    /// A view restored after a restart: its persisted collection (content, version, history) and the source as
    /// it is now. The index is rebuilt from the source; when the persisted content is not what the definition
    /// gives on it (the source changed after the view was saved), the difference is committed as one version.
    /// - Parameter gates: an index of `source` (`GateIndex`): when it covers the definition's gate, only the
    ///   items that pass the gate are evaluated.
    /// - Complexity: O(n log n) for n source items (n items that pass the gate, with `gates`).
    public init(
        restoring collection: VersionedCollection, definition: ViewDefinition, source: VersionedCollection?,
        gates: GateIndex? = nil
    ) {
        self.definition = definition
        rules = ViewRules(definition)
        self.collection = collection
        derive(from: source, gates: gates) { collection, content in
            if content != collection.snapshot() { LiveView.replace(&collection, with: content) }
        }
    }

    /// Gives the view's content a new epoch (`VersionedCollection.renewed(epoch:)`); the content stays.
    /// - Precondition: `epoch` is a valid epoch.
    public mutating func renewEpoch(_ epoch: String) {
        collection = collection.renewed(epoch: epoch)
    }

    /// The current version of the view.
    public var version: Version { collection.version }

    /// The items the view shows.
    public var itemCount: Int { collection.itemCount }

    /// The bytes of the ids and data of the sections and items the view shows (`VersionedCollection.contentBytes`).
    public var contentBytes: Int { collection.contentBytes }

    /// Limits of the view's kept history.
    public var limits: HistoryLimits {
        get { collection.limits }
        set { collection.limits = newValue }
    }

    /// The whole content.
    /// - Complexity: O(n) for the n items shown.
    public func snapshot() -> [Section] { collection.snapshot() }

    /// The item the view shows with this id, and where it shows it (in a view sorted by score, its rank).
    /// - Complexity: O(log n).
    public func item(id: String) -> (item: Item, at: ItemPath)? { collection.item(id: id) }

    /// ONE coalesced changeset from `since` to the current version, as `VersionedCollection.changes(since:)`.
    /// - Complexity: proportional to what changed since then, up to O(n log n).
    public func changes(since: Version) -> Changeset? { collection.changes(since: since) }

    /// Brings the view up to date with a change of its source.
    /// - Returns: the view's changeset, or nil when the view did not change (then no version is committed).
    /// - Complexity: O(k log n) for k touched items, plus the changeset; a change touching many items (more
    ///   than about the square root of the view's size) or removing everything rebuilds the content from the
    ///   index and diffs it in full, O(n log n).
    public mutating func apply(_ delta: SourceDelta) -> Changeset? {
        let count = delta.items.count
        if delta.removesEverything || (count > 64 && count * count > index.count) {
            if delta.removesEverything {
                members = [:]
                index = OrderedIndex()
            }
            for (id, data) in delta.items { _ = update(id: id, data: data) }
            let content = materialize()
            let changeset = LiveView.replace(&collection, with: content)
            return changeset.isEmpty ? nil : changeset
        }
        var touches: [Touch] = []
        var dataChanges: [(id: String, key: [UInt8])] = []
        for (id, data) in delta.items {
            switch update(id: id, data: data) {
            case .none: continue
            case .data(let id, let key): dataChanges.append((id, key))
            case .moved(let touch): touches.append(touch)
            }
        }
        guard !touches.isEmpty || !dataChanges.isEmpty else { return nil }
        return commit(touches, dataChanges)
    }

    /// Replaces the definition, keeping the view's epoch: the content is computed anew from `source` and the
    /// changeset is the full diff from the old content (a new sort order is a set of minimal moves). Another
    /// definition that gives the same content still commits a version, with an empty changeset: the view's
    /// snapshot shows its definition, so a cache or a client holding the old one must see another version (and
    /// `If-Match` on the old version must fail, or a redefinition made meanwhile is lost).
    /// - Parameter committingAnotherDefinition: false to keep the version when only the definition changes, as
    ///   views did before: for a definition recorded then, replayed as it was applied.
    /// - Returns: the changeset, with `from == to` (and empty) when nothing that commits a version changed.
    /// - Complexity: O(n log n) for n source items.
    public mutating func redefine(
        _ definition: ViewDefinition, source: VersionedCollection?, committingAnotherDefinition: Bool = true
    ) -> Changeset {
        let isAnother =
            committingAnotherDefinition && definition.canonicalJSON.bytes != self.definition.canonicalJSON.bytes
        self.definition = definition
        rules = ViewRules(definition)
        var changeset = Changeset(from: version, to: version)
        derive(from: source) { collection, content in
            changeset = LiveView.replace(&collection, with: content)
            if changeset.isEmpty && isAnother { changeset = collection.commitUnchangedContent() }
        }
        return changeset
    }

    /// Replaces the content of a view's collection with content the view built.
    @discardableResult
    private static func replace(_ collection: inout VersionedCollection, with content: [Section]) -> Changeset {
        do {
            return try collection.replace(with: content)
        } catch {
            preconditionFailure("a view's own content was rejected: \(error)")
        }
    }

    /// A collection created at `<epoch>.1` with content the view built, whose ids are valid and unique by
    /// construction (the source's item ids; section ids checked by `ViewRules`): it skips their check.
    private static func uncheckedCollection(epoch: String, sections: [Section] = [], limits: HistoryLimits)
        -> VersionedCollection
    {
        let version = Version(epoch: epoch, seq: 1)
        var history = History()
        history.record([.replaced(old: [])], committing: version, limits: limits)
        return VersionedCollection(
            store: Store(validated: sections), version: version, history: history, limits: limits)
    }
}
