/// A collection of sections and items at a version, with the recent history its change feed needs.
///
/// Mutations go through `apply`, `replace` and `upsert`; each returns the changeset from the old version to the
/// new one, and commits a new version only when something changed.
public struct VersionedCollection: Sendable {
    private(set) var store: Store
    var history = History()
    /// The current version, `<epoch>.<seq>`.
    public private(set) var version: Version
    /// Limits of the kept history; lowering them drops the oldest versions at once.
    public var limits: HistoryLimits {
        didSet { history.trim(to: limits) }
    }

    /// Creates the collection at `<epoch>.1` holding `sections`; `<epoch>.0` (the empty collection) is in the
    /// history, so `changes(since: <epoch>.0)` gives the creation changeset (all sections inserted).
    /// - Throws: `invalid_id` or `duplicate_id` for an invalid or repeated id in `sections`.
    /// - Precondition: `epoch` is a valid epoch.
    /// - Complexity: O(n).
    public init(epoch: String, sections: [Section], limits: HistoryLimits = .init()) throws(ModelError) {
        try Store.checkContent(sections)
        store = Store(validated: sections)
        version = Version(epoch: epoch, seq: 1)
        self.limits = limits
        history.record([.replaced(old: [])], committing: version, limits: limits)
    }

    /// The same content under a new epoch: at `<epoch>.1`, with `<epoch>.0` (the empty collection) in its history,
    /// as a collection created with it. A client that followed the old epoch starts over: its cursor is of another
    /// epoch. For a store that may have lost versions clients saw, which new writes would otherwise number again.
    /// - Precondition: `epoch` is a valid epoch.
    /// - Complexity: O(1): the content is shared.
    public func renewed(epoch: String) -> VersionedCollection {
        let version = Version(epoch: epoch, seq: 1)
        var history = History()
        history.record([.replaced(old: [])], committing: version, limits: limits)
        return VersionedCollection(store: store, version: version, history: history, limits: limits)
    }

    /// A collection restored as it was: its content, version and kept history (see `init(decoding:limits:)`).
    init(store: Store, version: Version, history: History, limits: HistoryLimits) {
        self.store = store
        self.version = version
        self.history = history
        self.limits = limits
    }

    /// The number of sections.
    public var sectionCount: Int { store.sectionCount }
    /// The number of items in all sections.
    public var itemCount: Int { store.itemCount }
    /// The bytes of the ids and data of all sections and items: about what the snapshot takes, encoded, beyond a
    /// few dozen bytes per item.
    public var contentBytes: Int { store.contentBytes }

    /// The whole content.
    /// - Complexity: O(n).
    public func snapshot() -> [Section] { store.snapshot() }

    /// The item with this id and its current index path.
    /// - Complexity: O(log n).
    public func item(id: String) -> (item: Item, at: ItemPath)? {
        guard let path = store.location(ofItem: id) else { return nil }
        return (store.item(at: path), path)
    }

    /// The data of the item with this id.
    /// - Complexity: O(1) hashing.
    func data(ofItem id: String) -> JSONData? { store.data(ofItem: id) }

    /// Applies ops in order, atomically: a thrown error (with `opIndex` set) leaves everything untouched.
    /// A batch that changes nothing commits nothing: the version stays and the changeset is empty.
    /// - Returns: the changeset from the old version to the new one.
    /// - Complexity: proportional to what the ops touch (O(k log n) for k touched items), except for large
    ///   batches, which fall back to a full diff, O(n log n).
    public mutating func apply(_ ops: [Op]) throws(ModelError) -> Changeset {
        try apply(ops, needsChangeset: true) ?? Changeset(from: version, to: version)
    }

    /// Applies ops exactly as `apply` does (same version, same history), for replaying a journal: the changeset
    /// is computed only where it is needed to tell whether the batch changed anything.
    /// - Complexity: O(k) for a batch that evidently changes the content; otherwise that of `apply`.
    public mutating func replay(_ ops: [Op]) throws(ModelError) {
        _ = try apply(ops, needsChangeset: false)
    }

    /// Applies ops; the changeset, or nil when nothing changed or `needsChangeset` is false and the batch
    /// evidently changed the content (then it is committed without one).
    private mutating func apply(_ ops: [Op], needsChangeset: Bool) throws(ModelError) -> Changeset? {
        var editor = Editor(store: Store.empty)
        swap(&editor.store, &store)
        defer { swap(&editor.store, &store) }
        for (index, op) in ops.enumerated() {
            do {
                try editor.apply(op)
            } catch {
                editor.rollback()
                var error = error
                error.opIndex = index
                throw error
            }
        }
        guard !editor.log.isEmpty else { return nil }
        if !needsChangeset && Self.evidentlyChanges(editor.log) {
            commit(editor.log, as: version.next)
            return nil
        }
        return commitChanges(editor.log, to: editor.store)
    }

    /// Commits edits that the caller makes on the content itself: for a caller that knows where everything goes
    /// (a live view, from its index), so that no op is resolved. The changeset comes from the logged edits, as
    /// `apply`'s does and as `changes(since:)` builds it again later: a poll that catches up over this one version
    /// gets the same changeset as the live event (where moves tie, the log's choice, not the caller's). Same no-op
    /// rule as `apply`.
    /// - Parameter edit: makes the edits; it must not fail half-way (there is no rollback).
    /// - Returns: the changeset, or nil when it is empty (then no version is committed).
    /// - Complexity: that of the edits, plus proportional to what they touched (up to O(n log n)).
    mutating func commit(_ edit: (inout Editor) -> Void) -> Changeset? {
        var editor = Editor(store: Store.empty)
        swap(&editor.store, &store)
        defer { swap(&editor.store, &store) }
        edit(&editor)
        guard !editor.log.isEmpty else { return nil }
        return commitChanges(editor.log, to: editor.store)
    }

    /// Commits `log`, which took the content to `store`, with its changeset; nil, committing nothing, when the
    /// changeset is empty (the log undid itself).
    private mutating func commitChanges(_ log: [Change], to store: Store) -> Changeset? {
        let next = version.next
        let changeset = Coalescing.changeset(for: log[...], in: store, from: version, to: next)
        guard !changeset.isEmpty else { return nil }
        commit(log, as: next)
        return changeset
    }

    /// Whether a log certainly leaves the content changed: it inserts an item or a section that nothing in the
    /// log removes, which therefore was not there before and is there after.
    /// - Complexity: O(e) for e changes.
    private static func evidentlyChanges(_ log: [Change]) -> Bool {
        for change in log {
            switch change {
            case .itemInserted(let id, _, _):
                return !log.contains {
                    if case .itemRemoved(let item, _, _) = $0 { item.id.hasSameBytes(as: id) } else { false }
                }
            case .sectionInserted(let id, _):
                return !log.contains {
                    if case .sectionRemoved(let removed, _, _) = $0 { removed.hasSameBytes(as: id) } else { false }
                }
            default:
                continue
            }
        }
        return false
    }

    /// Replaces the whole content, diffing the old against the new; same no-op rule as `apply`. A large content
    /// is diffed while its store is built on another thread (`diffAndStore`).
    /// - Throws: `invalid_id` or `duplicate_id` for an invalid or repeated id in `sections`.
    /// - Complexity: O(n log n).
    public mutating func replace(with sections: [Section]) throws(ModelError) -> Changeset {
        let next = version.next
        let old = store.snapshot()
        let changeset: Changeset
        let replacement: Store
        if sections.reduce(0, { $0 + $1.items.count }) < VersionedCollection.concurrentReplaceMinimum {
            changeset = try Changeset.diff(from: old, to: sections, versions: (version, next))
            guard !changeset.isEmpty else { return Changeset(from: version, to: version) }
            replacement = Store(validated: sections)
        } else {
            var built: Store?
            (changeset, built) = try VersionedCollection.diffAndStore(old, sections, versions: (version, next))
            guard !changeset.isEmpty, let built else { return Changeset(from: version, to: version) }
            replacement = built
        }
        store = replacement
        commit([.replaced(old: old)], as: next)
        return changeset
    }

    /// Commits a version that changes no section and no item: for a view given another definition with the same
    /// content (`LiveView.redefine`).
    /// - Returns: the empty changeset from the version before to the new one.
    mutating func commitUnchangedContent() -> Changeset {
        let from = version
        commit([], as: version.next)
        return Changeset(from: from, to: version)
    }

    /// Content with fewer items than this is replaced on the calling thread alone.
    static let concurrentReplaceMinimum = 16_384

    /// The diff from `old` to `new` and the store of `new`, built at the same time: the store does not depend on
    /// the diff, and is dropped when the diff rejects `new` (building it from unchecked ids is safe, only
    /// useless).
    /// - Complexity: O(n log n), over two threads.
    private static func diffAndStore(_ old: [Section], _ new: [Section], versions: (from: Version, to: Version))
        throws(ModelError) -> (Changeset, Store?)
    {
        var diffed = Result<Changeset, ModelError>.success(Changeset(from: versions.from, to: versions.from))
        var built: Store?
        concurrently(&diffed, &built, if: true) { diffed in
            diffed = Result { () throws(ModelError) in try Changeset.diff(from: old, to: new, versions: versions) }
        } _: { built in
            built = Store(validated: new)
        }
        return (try diffed.get(), built)
    }

    /// ONE coalesced changeset from `since` to the current version, obeying all the rules of a single one
    /// (`docs/changesets.md#the-rules`):
    /// empty with `from == to` when `since` is the current version; nil when `since` is of another epoch, ahead
    /// of the current version, or older than the kept history.
    /// - Complexity: proportional to what changed since then, up to O(n log n).
    public func changes(since: Version) -> Changeset? {
        guard since.epoch == version.epoch, since.seq <= version.seq else { return nil }
        guard since != version else { return Changeset(from: version, to: version) }
        guard let entries = history.entries(after: since, current: version) else { return nil }
        let log = entries.lazy.flatMap(\.changes)
        return Coalescing.changeset(for: log, in: store, from: since, to: version)
    }

    private mutating func commit(_ changes: [Change], as next: Version) {
        version = next
        history.record(changes, committing: next, limits: limits)
    }
}
