extension VersionedCollection {
    /// Upserts one item, API.md's `PUT /items/{id}`. If it exists its data is replaced and, where `section` or
    /// `index` is given, it moves there (`section` alone: to that section's end; `index` alone: within its own
    /// section). If not, it is inserted at `section` (default: the last section; a collection with no section
    /// first gets a section with id "default" and null data, also when `section` names "default") at `index`
    /// (default: the end).
    /// - Returns: the changeset, whether the item was created, and the ops it amounts to (replaying them with
    ///   `apply` gives the same result).
    /// - Throws: `ModelError` without an `opIndex`: the request has no ops, the ones it amounts to are Model's.
    /// - Complexity: that of `apply` for one or two ops.
    public mutating func upsert(id: String, data: JSONData, section: SectionRef?, index: Int?) throws(ModelError)
        -> (changeset: Changeset, created: Bool, ops: [Op])
    {
        let ops = try upsertOps(id: id, data: data, section: section, index: index)
        let changeset: Changeset
        do {
            changeset = try apply(ops.ops)
        } catch {
            throw ModelError(error.code, error.message)
        }
        return (changeset, ops.created, ops.ops)
    }

    /// The id of the section an upsert makes in a collection that has none.
    public static let firstSectionID = "default"

    private func upsertOps(id: String, data: JSONData, section: SectionRef?, index: Int?) throws(ModelError)
        -> (ops: [Op], created: Bool)
    {
        try ModelError.check(id: id, what: "item")
        if let (_, at) = item(id: id) {
            var ops: [Op] = [.updateItems([Item(id: id, data: data)])]
            guard section != nil || index != nil else { return (ops, false) }
            let target = try section.map { ref throws(ModelError) in try store.resolve(ref) } ?? at.section
            let count = store.itemCount(inSection: target)
            let to = index ?? (target == at.section ? count - 1 : count)
            ops.append(.moveItem(.id(id), to: ItemPosition(section: .id(store.sectionID(at: target)), index: to)))
            return (ops, false)
        }
        let item = Item(id: id, data: data)
        // Naming the section an empty collection gets is leaving `section` out: both create it.
        if let section, section != .id(Self.firstSectionID) || store.sectionCount > 0 {
            let target = try store.resolve(section)
            let at = ItemPosition(
                section: .id(store.sectionID(at: target)), index: index ?? store.itemCount(inSection: target))
            return ([.insertItems(at: at, items: [item])], true)
        }
        guard store.sectionCount > 0 else {
            let at = ItemPosition(section: .id(Self.firstSectionID), index: index ?? 0)
            return (
                [
                    .insertSections(at: 0, sections: [Section(id: Self.firstSectionID)]),
                    .insertItems(at: at, items: [item]),
                ],
                true
            )
        }
        let last = store.sectionCount - 1
        let at = ItemPosition(section: .id(store.sectionID(at: last)), index: index ?? store.itemCount(inSection: last))
        return ([.insertItems(at: at, items: [item])], true)
    }
}
