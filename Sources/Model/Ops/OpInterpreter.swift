/// Applies the ops of API.md's table to an editor. Each op resolves and checks all its references against the
/// state before it and only then edits, so a thrown error leaves the op without effect; the caller rolls back the
/// ops before it.
extension Editor {
    /// - Complexity: O(k log n) for an op naming k sections or items (plus the items of deleted sections).
    mutating func apply(_ op: Op) throws(ModelError) {
        switch op {
        case .insertSections(let at, let sections):
            try Store.check(index: at, upTo: store.sectionCount, closed: true, what: "section index")
            try store.checkNew(sections: sections)
            for (offset, section) in sections.enumerated() {
                insertSection(id: section.id, data: section.data, at: at + offset)
                for (i, item) in section.items.enumerated() {
                    insertItem(item, at: ItemPath(section: at + offset, item: i))
                }
            }
        case .deleteSections(let refs):
            var indices = Set<Int>()
            for ref in refs {
                guard indices.insert(try store.resolve(ref)).inserted else {
                    throw ModelError(.duplicateReference, "section \(ref) is named twice")
                }
            }
            for index in indices.sorted(by: >) { removeSection(at: index) }
        case .moveSection(let ref, let to):
            let from = try store.resolve(ref)
            try Store.check(index: to, upTo: store.sectionCount, closed: false, what: "section index")
            moveSection(from: from, to: to)
        case .updateSection(let ref, let data):
            setSectionData(data, at: try store.resolve(ref))
        case .insertItems(let at, let items):
            let section = try store.resolve(at.section)
            try Store.check(
                index: at.index, upTo: store.itemCount(inSection: section), closed: true, what: "item index")
            try store.checkNew(itemIDs: items.lazy.map(\.id))
            for (offset, item) in items.enumerated() {
                insertItem(item, at: ItemPath(section: section, item: at.index + offset))
            }
        case .deleteItems(let refs):
            var paths = Set<ItemPath>()
            for ref in refs {
                guard paths.insert(try store.resolve(ref)).inserted else {
                    throw ModelError(.duplicateReference, "item \(ref) is named twice")
                }
            }
            for path in paths.sorted(by: >) { removeItem(at: path) }
        case .moveItem(let ref, let to):
            let from = try store.resolve(ref)
            let section = try store.resolve(to.section)
            let count = store.itemCount(inSection: section)
            try Store.check(index: to.index, upTo: count, closed: section != from.section, what: "item index")
            moveItem(from: from, to: ItemPath(section: section, item: to.index))
        case .updateItems(let items):
            var paths: [ItemPath] = []
            var seen = Set<ExactString>()
            for item in items {
                paths.append(try store.resolve(.id(item.id)))
                guard seen.insert(ExactString(item.id)).inserted else {
                    throw ModelError(.duplicateReference, "item \(item.id.quotedAsJSON) is named twice")
                }
            }
            for (path, item) in zip(paths, items) { setItemData(item.data, at: path) }
        }
    }
}
