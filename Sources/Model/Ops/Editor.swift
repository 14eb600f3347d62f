/// A store being edited, with the log of primitive changes made so far: every edit goes through here so that
/// the log can undo a failed batch and the history can walk back to older versions.
struct Editor {
    var store: Store
    private(set) var log: [Change] = []

    init(store: Store) {
        self.store = store
    }

    /// Undoes every logged change, newest first, and empties the log.
    /// - Complexity: O(k) store edits for k logged changes.
    mutating func rollback() {
        while let change = log.popLast() { store.undo(change) }
    }

    mutating func insertSection(id: String, data: JSONData, at index: Int) {
        store.insertSection(id: id, data: data, at: index)
        log.append(.sectionInserted(id: id, at: index))
    }

    /// Removes a section and its items, last item first.
    mutating func removeSection(at index: Int) {
        let id = store.sectionID(at: index)
        for i in stride(from: store.itemCount(inSection: index) - 1, through: 0, by: -1) {
            removeItem(at: ItemPath(section: index, item: i))
        }
        log.append(.sectionRemoved(id: id, data: store.sectionData(at: index), at: index))
        store.removeSection(at: index)
    }

    mutating func moveSection(from: Int, to: Int) {
        guard from != to else { return }
        log.append(.sectionMoved(id: store.sectionID(at: from), from: from, to: to))
        store.moveSection(from: from, to: to)
    }

    mutating func setSectionData(_ data: JSONData, at index: Int) {
        let old = store.sectionData(at: index)
        guard old != data else { return }
        log.append(.sectionDataSet(id: store.sectionID(at: index), old: old))
        store.setSectionData(data, at: index)
    }

    mutating func insertItem(_ item: Item, at path: ItemPath) {
        store.insertItem(item, at: path)
        log.append(.itemInserted(id: item.id, section: store.sectionID(at: path.section), at: path.item))
    }

    mutating func removeItem(at path: ItemPath) {
        let item = store.removeItem(at: path)
        log.append(.itemRemoved(item, section: store.sectionID(at: path.section), at: path.item))
    }

    /// Removes the item at `from`, then inserts it at `to` in the state after the removal.
    mutating func moveItem(from: ItemPath, to: ItemPath) {
        guard from != to else { return }
        let id = store.item(at: from).id
        store.moveItem(from: from, to: to)
        log.append(
            .itemMoved(
                id: id, from: store.sectionID(at: from.section), fromIndex: from.item,
                to: store.sectionID(at: to.section), toIndex: to.item))
    }

    mutating func setItemData(_ data: JSONData, at path: ItemPath) {
        let old = store.item(at: path).data
        guard old != data else { return }
        log.append(.itemDataSet(id: store.item(at: path).id, old: old))
        store.setItemData(data, at: path)
    }
}
