/// The changeset of a log of one item change (or of two that a live view makes of one: an item moved and given
/// other data, or one removed and another inserted), read straight off the changes and the store.
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
        if log.count == 2 {
            return movedAndSet(log, in: store, from: from, to: to)
                ?? removedAndInserted(log, in: store, from: from, to: to)
        }
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
            guard let move = move(id, fromSection, fromIndex, toSection, toIndex, in: store) else { return nil }
            items.moved = [move]
        case .itemDataSet(let id, _):
            guard let at = store.location(ofItem: id) else { return nil }
            items.updated = [ItemUpdate(at: at, item: store.item(at: at))]
        case .sectionInserted, .sectionRemoved, .sectionMoved, .sectionDataSet, .replaced:
            return nil
        }
        return Changeset(from: from, to: to, items: items)
    }

    /// An item moved, then given other data (a live view's item whose sort key changed): a move and an update at
    /// its destination, as the general route lists them.
    private static func movedAndSet(
        _ log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset? {
        guard case .itemMoved(let id, let fromSection, let fromIndex, let toSection, let toIndex) = log.first,
            case .itemDataSet(let setID, _) = log.last, setID.hasSameBytes(as: id),
            let move = move(id, fromSection, fromIndex, toSection, toIndex, in: store)
        else {
            return nil
        }
        var items = ItemChanges()
        items.moved = [move]
        items.updated = [ItemUpdate(at: move.to, item: store.item(at: move.to))]
        return Changeset(from: from, to: to, items: items)
    }

    /// One item removed, then another inserted (a limited view's item leaving it as another crosses the limit): a
    /// deletion and an insertion, as the general route lists them (the other items keep their order: none moves).
    private static func removedAndInserted(
        _ log: some BidirectionalCollection<Change>, in store: Store, from: Version, to: Version
    ) -> Changeset? {
        guard case .itemRemoved(let removed, let fromSection, let fromIndex) = log.first,
            case .itemInserted(let id, let toSection, let toIndex) = log.last, !id.hasSameBytes(as: removed.id),
            let old = store.sectionIndex(of: fromSection), let new = store.sectionIndex(of: toSection)
        else {
            return nil
        }
        var items = ItemChanges()
        items.deleted = [ItemDeletion(at: ItemPath(section: old, item: fromIndex), id: removed.id)]
        let at = ItemPath(section: new, item: toIndex)
        items.inserted = [ItemInsertion(at: at, item: store.item(at: at))]
        return Changeset(from: from, to: to, items: items)
    }

    /// The move of an `itemMoved` change, or nil for two neighbours swapped: moving either is one move, and which
    /// one the general route lists depends on its tie-breaking; it builds that changeset too, so that a version's
    /// changeset is the same whichever route built it.
    private static func move(
        _ id: String, _ fromSection: String, _ fromIndex: Int, _ toSection: String, _ toIndex: Int, in store: Store
    ) -> ItemMove? {
        guard let old = store.sectionIndex(of: fromSection), let new = store.sectionIndex(of: toSection),
            old != new || abs(fromIndex - toIndex) > 1
        else {
            return nil
        }
        return ItemMove(
            from: ItemPath(section: old, item: fromIndex), to: ItemPath(section: new, item: toIndex), id: id)
    }
}
