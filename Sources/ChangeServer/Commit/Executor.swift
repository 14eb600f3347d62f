import Model

/// Applies journal records to the collections and views: the one place where a mutation takes effect, both when
/// the server answers it and when recovery replays it. Records must be applied in journal order per collection (a
/// view's records in order with its sources'); records of unrelated collections touch nothing in common and may
/// be applied in parallel (`Lanes`, `LaneRouter`). A source's views change in the same step as the source, under
/// its lock, so nobody sees a view that reflects half a mutation.
struct Executor: Sendable {
    let registry: Registry
    let views: ViewRegistry
    let limits: HistoryLimits

    /// A view's changeset that a mutation of its source produced.
    struct ViewChange: Sendable {
        let entry: ViewEntry
        let changeset: Changeset
    }

    enum Outcome: Sendable {
        /// The collection changed (or was created) and is now at `changeset.to`; `views` changed with it.
        case committed(CollectionEntry, Changeset, created: Bool, views: [ViewChange])
        /// Nothing changed: the version stays and the changeset is empty.
        case unchanged(CollectionEntry, Changeset)
        /// The collection was deleted; `views` emptied with it.
        case deleted(CollectionEntry, views: [ViewChange])
        /// The view was defined or its definition replaced, and is now at `changeset.to`.
        case viewCommitted(ViewEntry, Changeset, created: Bool)
        /// A new definition gave the same content: the view's version stays.
        case viewUnchanged(ViewEntry, Changeset)
        case viewDeleted(ViewEntry)
        /// The record was refused and changed nothing.
        case rejected(Rejection)
    }

    init(registry: Registry, views: ViewRegistry = ViewRegistry(), limits: HistoryLimits) {
        self.registry = registry
        self.views = views
        self.limits = limits
    }

    /// Applies a record at recovery, where its answer is long gone: as `execute` does (same versions, same
    /// history), but ops on a collection no view reads are applied without building the changesets nobody reads.
    func replay(_ record: JournalRecord) {
        guard case .ops(let name, let ops, let conditions) = record, let entry = registry.entry(name),
            views.views(of: name).isEmpty
        else {
            _ = execute(record)
            return
        }
        entry.content.withLock { content in
            guard (try? conditions.check(content.version)) != nil else { return }
            try? content.replay(ops)
        }
    }

    func execute(_ record: JournalRecord) -> Outcome {
        do throws(Rejection) {
            switch record {
            case .put(let name, let epoch, let sections, let conditions):
                guard let entry = registry.entry(name) else { return try create(name, epoch, sections, conditions) }
                let prepared = prepareReplacement(of: entry, with: sections, conditions)
                return try commitReplacement(prepared, of: entry, with: sections, conditions)
            case .ops(let name, _, _), .upsert(let name, _, _, _, _, _, _):
                guard let (conditions, mutation) = Self.mutation(record) else {
                    preconditionFailure("ops and upserts mutate")
                }
                return try mutate(try existing(name), conditions, mutation)
            case .delete(let name, let conditions):
                let entry = try existing(name)
                let changes = try entry.content.withLock { content throws(Rejection) in
                    try conditions.check(content.version)
                    return updateViews(of: name) { .deleted }
                }
                _ = registry.remove(entry)
                return .deleted(entry, views: changes)
            case .defineView(let name, let epoch, let definition, let conditions, let versionsEveryDefinition):
                // On the view's lane and every lane its source may be on (`LaneRouter`): its version holds here.
                let version = views.entry(name).map { entry in entry.live.withLock { $0.version } }
                try conditions.check(version, of: .view)
                return try define(name, epoch, definition, versionsEveryDefinition: versionsEveryDefinition)
            case .deleteView(let name, let conditions):
                guard let entry = views.entry(name) else { throw .viewNotFound(name) }
                try conditions.check(entry.live.withLock { $0.version }, of: .view)
                views.remove(entry, source: entry.live.withLock { $0.definition.source })
                return .viewDeleted(entry)
            }
        } catch {
            return .rejected(error)
        }
    }

    /// Applies an upsert or ops without waiting for any lock (`Committer`, on the syncer thread): as `execute` does,
    /// or nil, having changed nothing, when the collection's lock is taken (a long read may hold it), when it feeds
    /// a view (whose lock it would wait for), or for any other record.
    func executeWithoutWaiting(_ record: JournalRecord) -> Outcome? {
        guard let (conditions, mutation) = Self.mutation(record) else { return nil }
        // A missing collection is refused without taking any lock.
        guard let entry = registry.entry(record.name) else { return execute(record) }
        guard views.count(of: record.name) == 0 else { return nil }
        do throws(Rejection) {
            guard
                let (changeset, created) = try entry.content.withLockIfAvailable({ content throws(Rejection) in
                    try conditions.check(content.version)
                    do throws(ModelError) {
                        return try mutation(&content)
                    } catch {
                        throw .model(error)
                    }
                })
            else { return nil }
            if changeset.isEmpty { return .unchanged(entry, changeset) }
            return .committed(entry, changeset, created: created, views: [])
        } catch {
            return .rejected(error)
        }
    }

    /// An ops or upsert record's conditions, and what it does to its collection's content (its changeset, and
    /// whether it created an item); nil for other records.
    private static func mutation(_ record: JournalRecord) -> (
        JournalRecord.Conditions, (inout VersionedCollection) throws(ModelError) -> (Changeset, Bool)
    )? {
        switch record {
        case .ops(_, let ops, let conditions):
            return (conditions, { content throws(ModelError) in (try content.apply(ops), false) })
        case .upsert(_, let id, let data, let section, let index, let conditions, let refusesMissingDefault):
            return (
                conditions,
                { content throws(ModelError) in
                    if refusesMissingDefault, content.sectionCount == 0 {
                        throw ModelError(
                            .sectionNotFound, "no section with id \"\(VersionedCollection.firstSectionID)\"")
                    }
                    let result = try content.upsert(id: id, data: data, section: section, index: index)
                    return (result.changeset, result.created)
                }
            )
        case .put, .delete, .defineView, .deleteView:
            return nil
        }
    }

    private func create(_ name: String, _ epoch: String, _ sections: [Section], _ conditions: JournalRecord.Conditions)
        throws(Rejection) -> Outcome
    {
        try conditions.check(nil)
        guard Version.isValidEpoch(epoch) else { throw .invalidRecord("a journal record has an invalid epoch") }
        let content: VersionedCollection
        do throws(ModelError) {
            content = try VersionedCollection(epoch: epoch, sections: sections, limits: limits)
        } catch {
            throw .model(error)
        }
        let created = content.version
        let changeset = content.changes(since: Version(epoch: epoch, seq: 0)) ?? Changeset(from: created, to: created)
        let entry = registry.insert(CollectionEntry(name: name, content: content))
        let changes = entry.content.withLock { content in updateViews(of: name) { .created(content) } }
        return .committed(entry, changeset, created: true, views: changes)
    }

    private func mutate(
        _ entry: CollectionEntry, _ conditions: JournalRecord.Conditions,
        _ mutation: (inout VersionedCollection) throws(ModelError) -> (Changeset, Bool)
    ) throws(Rejection) -> Outcome {
        let (changeset, created, changes) = try entry.content.withLock { content throws(Rejection) in
            try conditions.check(content.version)
            let (changeset, created): (Changeset, Bool)
            do throws(ModelError) {
                (changeset, created) = try mutation(&content)
            } catch {
                throw .model(error)
            }
            guard !changeset.isEmpty else { return (changeset, created, [ViewChange]()) }
            let changes = updateViews(of: entry.name) {
                SourceDelta(source: content, since: changeset.from) ?? .created(content)
            }
            return (changeset, created, changes)
        }
        if changeset.isEmpty { return .unchanged(entry, changeset) }
        return .committed(entry, changeset, created: created, views: changes)
    }

    /// A replacement made on copies of a collection's content and of its views, outside their locks
    /// (`prepareReplacement`).
    struct PreparedReplacement {
        /// The version of the content the copy was taken at.
        let base: Version
        /// The copy, replaced.
        let content: VersionedCollection
        /// The replacement's changeset (empty when the content stays), or the model's refusal.
        let changeset: Result<Changeset, ModelError>
        /// The collection's views, each copied and brought up to date with the replacement; empty unless the
        /// content changed.
        let views: [PreparedView]
    }

    /// A view copied at `base` (with `definition`) and brought up to date with its source's replacement.
    struct PreparedView {
        let entry: ViewEntry
        let base: Version
        /// A redefinition that keeps the content keeps the version too: this tells it.
        let definition: ViewDefinition
        let live: LiveView
        /// Nil when the view's content stays.
        let changeset: Changeset?
    }

    /// Work made on copies, outside the locks of what it changes, told to `preparedObserver` before it is swapped in.
    enum Prepared {
        /// A replacement of the collection, with the views it updated.
        case replacement(CollectionEntry, views: [ViewEntry])
        /// A view's new definition.
        case redefinition(ViewEntry)
    }

    /// Told of the work this task prepares on copies, while it is not yet swapped in; nil outside tests (as
    /// `Coalescing.routeObserver`).
    @TaskLocal static var preparedObserver: (@Sendable (Prepared) -> Void)?

    /// The first half of a replacement: its diff, and its views' updates, whose time grows with the collection,
    /// made on copies without holding the collection's lock or its views', so that reads of the collection and of
    /// its views, and `GET /v1/collections` (which takes the lock of every collection it lists), never wait for
    /// them. Nil when the conditions refuse it, which `commitReplacement` then reports without a diff.
    /// - Complexity: that of `VersionedCollection.replace(with:)` and of the views' updates; O(1) under a lock.
    func prepareReplacement(
        of entry: CollectionEntry, with sections: [Section], _ conditions: JournalRecord.Conditions
    ) -> PreparedReplacement? {
        var content = entry.content.withLock { $0 }
        guard (try? conditions.check(content.version)) != nil else { return nil }
        let base = content.version
        let changeset = Result { () throws(ModelError) in try content.replace(with: sections) }
        var prepared: [PreparedView] = []
        let attached = views.views(of: entry.name)
        if case .success(let changeset) = changeset, !changeset.isEmpty, !attached.isEmpty {
            // O(n) for a replacement: made only when a view reads it.
            let delta = SourceDelta(source: content, since: base) ?? .created(content)
            for view in attached {
                var live = view.live.withLock { $0 }
                let (viewBase, definition) = (live.version, live.definition)
                let change = live.apply(delta)
                prepared.append(
                    PreparedView(entry: view, base: viewBase, definition: definition, live: live, changeset: change))
            }
        }
        Self.preparedObserver?(.replacement(entry, views: prepared.map(\.entry)))
        return PreparedReplacement(base: base, content: content, changeset: changeset, views: prepared)
    }

    /// The second half: the prepared content and views swapped in under the collection's lock; the old ones are
    /// freed after it is let go. A collection's writers, and the records of its views, are serial (its lane), so
    /// everything is still at the copies' versions. Should it not be, the replacement is made under the lock from
    /// the content as it is, as it was before there were two halves.
    /// - Complexity: O(v) under the lock, for v views.
    func commitReplacement(
        _ prepared: PreparedReplacement?, of entry: CollectionEntry, with sections: [Section],
        _ conditions: JournalRecord.Conditions
    ) throws(Rejection) -> Outcome {
        var retired: (content: VersionedCollection, views: [LiveView])?
        defer { withExtendedLifetime(retired) {} }
        let swapped = try entry.content.withLock { content throws(Rejection) -> (Changeset, [ViewChange])? in
            try conditions.check(content.version)
            guard let prepared, isCurrent(prepared, content.version, views.views(of: entry.name)) else { return nil }
            let changeset: Changeset
            do throws(ModelError) {
                changeset = try prepared.changeset.get()
            } catch {
                throw .model(error)
            }
            guard !changeset.isEmpty else { return (changeset, []) }
            var old: [LiveView] = []
            var changes: [ViewChange] = []
            for view in prepared.views {
                view.entry.live.withLock { live in
                    old.append(live)
                    live = view.live
                }
                if let change = view.changeset { changes.append(ViewChange(entry: view.entry, changeset: change)) }
            }
            retired = (content, old)
            content = prepared.content
            return (changeset, changes)
        }
        guard let (changeset, changes) = swapped else {
            return try mutate(entry, conditions) { content throws(ModelError) in
                (try content.replace(with: sections), false)
            }
        }
        if changeset.isEmpty { return .unchanged(entry, changeset) }
        return .committed(entry, changeset, created: false, views: changes)
    }

    /// Whether the collection is at the version a replacement was prepared at, with the same views, each at the
    /// version and with the definition it was copied with. Called under the collection's lock.
    private func isCurrent(_ prepared: PreparedReplacement, _ version: Version, _ attached: [ViewEntry]) -> Bool {
        guard version == prepared.base else { return false }
        guard case .success(let changeset) = prepared.changeset, !changeset.isEmpty else { return true }
        return attached.count == prepared.views.count
            && zip(attached, prepared.views).allSatisfy { view, copy in
                view === copy.entry
                    && view.live.withLock { $0.version == copy.base && $0.definition == copy.definition }
            }
    }

    /// Brings the views of `source` that `delta` can touch up to date with it (`ViewDispatch`; the delta is made
    /// only when the source has views); called with the source's lock held.
    private func updateViews(of source: String, _ delta: () -> SourceDelta) -> [ViewChange] {
        let dispatch = views.dispatch(of: source)
        guard !dispatch.targets.isEmpty else { return [] }
        let delta = delta()
        var changes: [ViewChange] = []
        for view in dispatch.targets(touchedBy: delta) {
            if let changeset = view.live.withLock({ $0.apply(delta) }) {
                changes.append(ViewChange(entry: view, changeset: changeset))
            }
        }
        return changes
    }

    private func define(_ name: String, _ epoch: String, _ json: JSONData, versionsEveryDefinition: Bool)
        throws(Rejection) -> Outcome
    {
        let definition: ViewDefinition
        do throws(ViewDefinitionError) {
            definition = try ViewDefinition(json: json.bytes)
        } catch {
            throw .invalidRecord("a journal record has an invalid view definition (\(error))")
        }
        // A copy of the source's content, outside its lock: the record's lanes include the source's (`LaneRouter`),
        // so it cannot change while the view is built, and the source's reads need not wait for the build.
        let source = registry.entry(definition.source)?.content.withLock { $0 }
        if let entry = views.entry(name) {
            // Redefined on a copy too, and swapped in: the view's records and its sources' run on these lanes, so
            // nothing else changes it meanwhile, and its readers need not wait. The old one is freed after the lock.
            var live = entry.live.withLock { $0 }
            let old = live.definition.source
            let changeset = live.redefine(
                definition, source: source, committingAnotherDefinition: versionsEveryDefinition)
            Self.preparedObserver?(.redefinition(entry))
            // Swapped, so that `live` holds the old view, freed after the lock.
            entry.live.withLock { swap(&$0, &live) }
            views.redefined(name, from: old, to: definition)
            entry.encodedSnapshot.invalidate()
            // Another definition commits a version, also with the same content (`LiveView.redefine`), but for a
            // record written before that was so (`JournalRecord.defineView`).
            if changeset.from == changeset.to { return .viewUnchanged(entry, changeset) }
            return .viewCommitted(entry, changeset, created: false)
        }
        guard Version.isValidEpoch(epoch) else { throw .invalidRecord("a journal record has an invalid epoch") }
        let live = LiveView(epoch: epoch, definition: definition, source: source, limits: limits)
        let created = live.version
        let changeset = live.changes(since: Version(epoch: epoch, seq: 0)) ?? Changeset(from: created, to: created)
        let entry = ViewEntry(name: name, live: live)
        views.insert(entry, definition: definition)
        return .viewCommitted(entry, changeset, created: true)
    }

    private func existing(_ name: String) throws(Rejection) -> CollectionEntry {
        guard let entry = registry.entry(name) else { throw .collectionNotFound(name) }
        return entry
    }
}
