import Model

/// Applies journal records to the collections: the one place where a mutation takes effect, both when the
/// server answers it and when recovery replays it. Records of one collection must be applied in journal order;
/// records of different collections touch nothing in common and may be applied in parallel (`Lanes`).
struct Executor: Sendable {
    let registry: Registry
    let limits: HistoryLimits

    enum Outcome: Sendable {
        /// The collection changed (or was created) and is now at `changeset.to`.
        case committed(CollectionEntry, Changeset, created: Bool)
        /// Nothing changed: the version stays and the changeset is empty.
        case unchanged(CollectionEntry, Changeset)
        /// The collection was deleted.
        case deleted(CollectionEntry)
        /// The record was refused and changed nothing.
        case rejected(Rejection)
    }

    /// Applies a record at recovery, where its answer is long gone: as `execute` does (same versions, same
    /// history), but ops are applied without building the changesets nobody will read.
    func replay(_ record: JournalRecord) {
        guard case .ops(let name, let ops, let conditions) = record, let entry = registry.entry(name) else {
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
                return try mutate(entry, conditions) { content throws(ModelError) in
                    (try content.replace(with: sections), false)
                }
            case .ops(let name, let ops, let conditions):
                return try mutate(try existing(name), conditions) { content throws(ModelError) in
                    (try content.apply(ops), false)
                }
            case .upsert(let name, let id, let data, let section, let index, let conditions):
                return try mutate(try existing(name), conditions) { content throws(ModelError) in
                    let result = try content.upsert(id: id, data: data, section: section, index: index)
                    return (result.changeset, result.created)
                }
            case .delete(let name, let conditions):
                let entry = try existing(name)
                try entry.content.withLock { content throws(Rejection) in try conditions.check(content.version) }
                _ = registry.remove(entry)
                return .deleted(entry)
            }
        } catch {
            return .rejected(error)
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
        return .committed(entry, changeset, created: true)
    }

    private func mutate(
        _ entry: CollectionEntry, _ conditions: JournalRecord.Conditions,
        _ mutation: (inout VersionedCollection) throws(ModelError) -> (Changeset, Bool)
    ) throws(Rejection) -> Outcome {
        let (changeset, created) = try entry.content.withLock { content throws(Rejection) in
            try conditions.check(content.version)
            do throws(ModelError) {
                return try mutation(&content)
            } catch {
                throw .model(error)
            }
        }
        return changeset.isEmpty ? .unchanged(entry, changeset) : .committed(entry, changeset, created: created)
    }

    private func existing(_ name: String) throws(Rejection) -> CollectionEntry {
        guard let entry = registry.entry(name) else { throw .collectionNotFound(name) }
        return entry
    }
}
