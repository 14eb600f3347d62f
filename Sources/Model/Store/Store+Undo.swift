extension Store {
    /// Undoes one change made to this store (the most recent one not undone yet).
    /// - Complexity: that of the store's primitive edits; O(n) for `replaced`.
    mutating func undo(_ change: Change) {
        switch change {
        case .sectionInserted(_, let at):
            removeSection(at: at)
        case .sectionRemoved(let id, let data, let at):
            insertSection(id: id, data: data, at: at)
        case .sectionMoved(_, let from, let to):
            moveSection(from: to, to: from)
        case .sectionDataSet(let id, let old):
            setSectionData(old, at: sectionIndex(of: id)!)
        case .itemInserted(_, let section, let at):
            _ = removeItem(at: ItemPath(section: sectionIndex(of: section)!, item: at))
        case .itemRemoved(let item, let section, let at):
            insertItem(item, at: ItemPath(section: sectionIndex(of: section)!, item: at))
        case .itemMoved(_, let from, let fromIndex, let to, let toIndex):
            moveItem(
                from: ItemPath(section: sectionIndex(of: to)!, item: toIndex),
                to: ItemPath(section: sectionIndex(of: from)!, item: fromIndex))
        case .itemDataSet(let id, let old):
            setItemData(old, at: location(ofItem: id)!)
        case .replaced(let old):
            self = Store(validated: old)
        }
    }
}
