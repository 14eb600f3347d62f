/// The changeset of a log of one item change, read straight off the change and the store.
///
/// Most mutations leave exactly one change: an upsert inserts an item or sets its data, a delete removes one, a
/// reorder moves one. Following such a log through `LogDelta` and `Assembly` (trackers, a sequence diff of the
/// section, the general emitter) cost about a third of the instructions of a whole durable upsert, and every
/// server on a shared database applies every mutation. A single item change needs none of that: the old and new
/// positions it names are the changeset's coordinates (a removal's and a move's origin in the old version, an
/// insertion's and a move's destination in the new one, `docs/changesets.md#coordinates`), and no section changed
/// index.
enum SingleChange {
    /// The changeset, or nil for any other log (the caller follows it in general).
    /// - Complexity: O(log n) lookups, plus copying the item an insert or update quotes.
    static func changeset(
        for log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset? {
        guard log.count == 1, let change = log.first else { return nil }
        var items = ItemChanges()
        switch change {
        case .itemInserted(_, let section, let index):
            guard let section = store.sectionIndex(of: section) else { return nil }
            let at = ItemPath(section: section, item: index)
            items.inserted = [ItemInsertion(at: at, item: store.item(at: at))]
        case .itemRemoved(let item, let section, let index):
            guard let section = store.sectionIndex(of: section) else { return nil }
            items.deleted = [ItemDeletion(at: ItemPath(section: section, item: index), id: item.id)]
        case .itemMoved(let id, let fromSection, let fromIndex, let toSection, let toIndex):
            guard let old = store.sectionIndex(of: fromSection), let new = store.sectionIndex(of: toSection) else {
                return nil
            }
            // Two neighbours swapped: moving either is one move, and which one the general route lists depends on
            // its tie-breaking; it builds this changeset too, so that a version's changeset is the same whichever
            // route built it.
            guard old != new || abs(fromIndex - toIndex) > 1 else { return nil }
            let origin = ItemPath(section: old, item: fromIndex)
            let destination = ItemPath(section: new, item: toIndex)
            items.moved = [ItemMove(from: origin, to: destination, id: id)]
        case .itemDataSet(let id, _):
            guard let at = store.location(ofItem: id) else { return nil }
            items.updated = [ItemUpdate(at: at, item: store.item(at: at))]
        case .sectionInserted, .sectionRemoved, .sectionMoved, .sectionDataSet, .replaced:
            return nil
        }
        return Changeset(from: from, to: to, items: items)
    }
}
